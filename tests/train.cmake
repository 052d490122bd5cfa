# Training runtime end to end: real mpirun jobs of cloze-train on shards made
# by cloze-prep from a real corpus (python3.11-doc's tutorial).
# test_train_resume rewrites a checkpoint's run-state version with this
add_executable(ckpt_set_version ${CLOZE_TEST_DIR}/ckpt_set_version.c)
target_link_libraries(ckpt_set_version PRIVATE cloze)
foreach(t train_layouts train_resume train_faults train_rundir slurm)
  cloze_add_script_test(test_${t} COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_${t}.sh
                        LABELS "mpi;train" TIMEOUT 900)
endforeach()
# activation recomputation: bitwise the same weights (seconds)
cloze_add_script_test(test_train_recompute COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_recompute.sh
                      LABELS "mpi;train" TIMEOUT 300)
