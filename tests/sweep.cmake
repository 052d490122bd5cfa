# results.csv's one reader and writer (src/sweep/csv.c), malformed text included.
cloze_add_unit_test(test_sweep_csv LIBS cloze_sweep LABELS sweep TIMEOUT 60)
# Scaling-study sweeps (cloze-sweep): real 2-rank cloze-train jobs of a tiny
# 2 x 2 grid, interrupted and resumed; failures; the report's fits and images;
# the same sweep as a Slurm job array.
foreach(t sweep sweep_report)
  cloze_add_script_test(test_${t} COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_${t}.sh
                        LABELS "mpi;sweep" TIMEOUT 600)
endforeach()
# Its own one-node Slurm (start + stop measured at 0.5 s here, so not shared
# with test_slurm's), one at a time with test_slurm's (RESOURCE_LOCK).
cloze_add_script_test(test_sweep_slurm COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_sweep_slurm.sh
                      LABELS "mpi;sweep;slurm" TIMEOUT 600)
set_tests_properties(test_sweep_slurm PROPERTIES RESOURCE_LOCK slurm)
# Fine-tuning per point (cloze-finetune grid on each point's checkpoint):
# locally, and inside the array tasks of a real one-node Slurm, one of them
# stopped by SIGUSR1 while it fine-tunes, requeued and resumed (skipped where
# Slurm is not installed).
cloze_add_script_test(test_sweep_finetune COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_sweep_finetune.sh
                      LABELS "mpi;sweep;finetune" TIMEOUT 600)
cloze_add_script_test(test_sweep_slurm_finetune
                      COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_sweep_slurm_finetune.sh
                      LABELS "mpi;sweep;slurm;finetune" TIMEOUT 600)
set_tests_properties(test_sweep_slurm_finetune PROPERTIES RESOURCE_LOCK slurm)
# The spec reader's messages for malformed specs (no training run).
cloze_add_script_test(test_sweep_spec COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_sweep_spec.sh
                      LABELS "sweep" TIMEOUT 120)
# µP's coordinate check (cloze-sweep coordcheck): µP flat across widths
# 64 ... 512, the standard logits growing, a planted readout multiplier of 1
# caught (seconds)
cloze_add_script_test(test_mup_coordcheck COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_mup_coordcheck.sh
                      LABELS sweep TIMEOUT 120)
# the report's µTransfer section (best learning rate per width, drift) on a
# synthetic lr x width x parametrization results.csv (seconds)
cloze_add_script_test(test_sweep_mutransfer COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_sweep_mutransfer.sh
                      LABELS sweep TIMEOUT 60)
# dist.exact = true: a point's results.csv row (timing columns aside) and
# checkpoint are the same on 1 and 2 ranks per point; without it they are
# not (seconds)
cloze_add_script_test(test_sweep_exact COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_sweep_exact.sh
                      LABELS "mpi;sweep" TIMEOUT 300)
