# A simulated cluster of network namespaces (launch/cloze-netsim, needs root;
# skipped with the reason otherwise): collectives across hosts and training
# on 4 hosts x 2 ranks against 1 rank.
cloze_add_script_test(test_netsim COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_netsim.sh
                      LABELS "mpi;netsim" TIMEOUT 600)
