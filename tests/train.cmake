# Training runtime end to end: real mpirun jobs of cloze-train on shards made
# by cloze-prep from a real corpus (python3.11-doc's tutorial).
# test_train_resume rewrites a checkpoint's run-state version with this
add_executable(ckpt_set_version ${CLOZE_TEST_DIR}/ckpt_set_version.c)
target_link_libraries(ckpt_set_version PRIVATE cloze)
foreach(t train_layouts train_resume train_faults train_rundir slurm)
  cloze_add_script_test(test_${t} COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_${t}.sh
                        LABELS "mpi;train" TIMEOUT 900)
endforeach()
# one Slurm cluster on the machine at a time (test_sweep_slurm starts one too)
set_tests_properties(test_slurm PROPERTIES RESOURCE_LOCK slurm)
# µP: exact resume per placement, the multipliers kept in checkpoints, the
# other parametrization refused, base width = standard (seconds)
cloze_add_script_test(test_train_mup COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_mup.sh
                      LABELS "mpi;train" TIMEOUT 300)
# activation recomputation: bitwise the same weights (seconds)
cloze_add_script_test(test_train_recompute COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_recompute.sh
                      LABELS "mpi;train" TIMEOUT 300)
# dist.exact: the same metrics and checkpoint bytes after 30 steps on 1-8 ranks (uneven on
# 3), BERT-mini and GPT-2-mini shapes, every algorithm, placement, bucket size, overlap,
# threads; resume 4 -> 3 ranks (120-135 CPU-seconds on Zen 4)
cloze_add_script_test(test_train_exact COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_exact.sh
                      LABELS "mpi;train" TIMEOUT 600)
# threads per rank from the affinity mask (taskset) and the OpenMP places, warnings when
# oversubscribed, none for 1 x 2 on 2 CPUs under OMP_PROC_BIND (seconds)
cloze_add_script_test(test_train_threads COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_threads.sh
                      LABELS "mpi;train" TIMEOUT 300)
# shard payloads verified when training opens them, cached beside the manifest (seconds)
cloze_add_script_test(test_train_shard_verify COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_shard_verify.sh
                      LABELS "mpi;train;data" TIMEOUT 300)
# launch/cloze-mpirun: SIGTERM / Ctrl-C -> checkpoint, exit 0, exact resume (seconds)
cloze_add_script_test(test_launch_signals COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_launch_signals.sh
                      LABELS "mpi;train" TIMEOUT 300)
# train.ckpt_writer=auto follows the free CPUs; inline and background files byte-identical (seconds)
cloze_add_script_test(test_train_ckpt_writer COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_ckpt_writer.sh
                      LABELS "mpi;train" TIMEOUT 300)
# fatal errors under mpirun on 2 ranks: one line, once, exit 1, no MPI_Abort banner (seconds)
cloze_add_script_test(test_errors COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_errors.sh
                      LABELS "mpi;train" TIMEOUT 300)
# resume guards: a changed seed/batch/schedule/model refused (one line, exit 1, files
# untouched) unless --allow-config-change; harmless changes logged (seconds)
cloze_add_script_test(test_train_resume_guard COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_resume_guard.sh
                      LABELS "mpi;train" TIMEOUT 300)
# the divergence warning's rule on recorded-shape loss sequences (instant)
cloze_add_unit_test(test_loss_watch LABELS "train")
# --resume: a failed one leaves no run directory or run.lock behind; --resume
# auto says in one line what it resumed or that it starts fresh (seconds)
cloze_add_script_test(test_train_resume_start COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_resume_start.sh
                      LABELS "mpi;train" TIMEOUT 300)
# TensorBoard event files read by the tensorboard package: equal to metrics.jsonl and
# results.jsonl, no step twice across resumes, damaged files cut (seconds; PyPI venv)
cloze_add_script_test(test_train_tensorboard COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_tensorboard.sh
                      LABELS "mpi;train" TIMEOUT 600)
# cloze-train plot: PNG and SVG of a real run (decoded), one line on a file without steps (seconds)
cloze_add_script_test(test_train_plot COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_plot.sh
                      LABELS "mpi;train" TIMEOUT 300)
