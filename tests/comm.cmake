# comm: the collectives at every rank count, the algorithms on host layouts
# given by hand, and the gradient sync under the real model's backward.
cloze_add_mpi_tests(test_comm NPS 1 2 3 4 5 TIMEOUT 120)
# a TCP eager limit the user set before the job is kept (src/comm/world.c)
cloze_add_mpi_test(test_comm_eager_preset 2 test_comm ARGS --eager-preset 65536 TIMEOUT 60)
set_tests_properties(test_comm_eager_preset PROPERTIES ENVIRONMENT
                     "${CLOZE_TEST_ENV};OMPI_MCA_btl_tcp_eager_limit=65536")

# the real model's backward through the gradient sync: overlap and bits
cloze_add_mpi_tests(test_grad_overlap NPS 2 3 TIMEOUT 120)

# ring, hierarchical and torus2d on every host layout given by hand (one
# machine); the simulated cluster runs them on real hosts (tests/netsim.cmake)
add_executable(test_comm_algos ${CLOZE_TEST_DIR}/test_comm_algos.c)
target_link_libraries(test_comm_algos PRIVATE cloze)
foreach(np 1 2 4 6)
  cloze_add_mpi_test(test_comm_algos_np${np} ${np} test_comm_algos TIMEOUT 120)
endforeach()

# dist.exact's int64 sums: planted values over fp32's range, the same bits as one
# rank in every algorithm and layout, the exact sum where double holds it (seconds)
add_executable(test_exact_sum ${CLOZE_TEST_DIR}/test_exact_sum.c)
target_link_libraries(test_exact_sum PRIVATE cloze)
foreach(np 1 2 3 4)
  cloze_add_mpi_test(test_exact_sum_np${np} ${np} test_exact_sum TIMEOUT 120)
endforeach()
