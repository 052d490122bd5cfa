# The one-node Slurm of the tests (tests/scripts/slurm_lib.sh) stops
# without leaving a process behind: a running job's slurmstepd and its
# processes are killed with the daemons (seconds). One Slurm cluster on the
# machine at a time (RESOURCE_LOCK slurm, as test_slurm and test_sweep_slurm).
cloze_add_script_test(test_slurm_cleanup COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_slurm_cleanup.sh
                      LABELS "slurm" TIMEOUT 120)
set_tests_properties(test_slurm_cleanup PROPERTIES RESOURCE_LOCK slurm)
