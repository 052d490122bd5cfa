# cloze-plan against an independent reference, its usage and errors, and the
# network calibration cloze-train's auto uses: 4 real ranks, a cluster file,
# and 2 simulated hosts where namespaces can be made (seconds to a minute).
cloze_add_script_test(test_plan COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_plan.sh
                      LABELS "mpi;train;plan" TIMEOUT 300)
