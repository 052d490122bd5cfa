# comm / optim / ckpt tests.
cloze_add_unit_test(test_ckpt)
add_dependencies(test_ckpt cloze-ckpt) # it runs the cloze-ckpt program

cloze_add_mpi_tests(test_comm NPS 1 2 3 4 5 TIMEOUT 120)

# the real model's backward through the gradient sync: overlap and bits
cloze_add_mpi_tests(test_grad_overlap NPS 2 3 TIMEOUT 120)

cloze_add_unit_test(test_optim)
cloze_add_script_test(test_optim_torch COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/test_optim_torch.py
                      LABELS python TIMEOUT 120)

cloze_add_mpi_tests(test_optim_dist NPS 1 2 3 4 5 TIMEOUT 120)

# The optimizer's AVX-512 path against its scalar definition, and the step
# with 1, 2 and 3 threads (one rank; the test sets the thread counts itself).
add_executable(test_optim_fast ${CLOZE_TEST_DIR}/test_optim_fast.c)
target_link_libraries(test_optim_fast PRIVATE cloze)
cloze_add_mpi_test(test_optim_fast 1 test_optim_fast TIMEOUT 120)

# ring, hierarchical and torus2d on every host layout given by hand (one
# machine); the simulated cluster runs them on real hosts (tests/netsim.cmake)
add_executable(test_comm_algos ${CLOZE_TEST_DIR}/test_comm_algos.c)
target_link_libraries(test_comm_algos PRIVATE cloze)
foreach(np 1 2 4 6)
  cloze_add_mpi_test(test_comm_algos_np${np} ${np} test_comm_algos TIMEOUT 120)
endforeach()
