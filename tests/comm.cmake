# comm / optim / ckpt tests.
cloze_add_unit_test(test_ckpt)
add_dependencies(test_ckpt cloze-ckpt) # it runs the cloze-ckpt program

add_executable(test_comm ${CLOZE_TEST_DIR}/test_comm.c)
target_link_libraries(test_comm PRIVATE cloze)
foreach(np 1 2 3 4 5)
  cloze_add_mpi_test(test_comm_np${np} ${np} test_comm TIMEOUT 120)
endforeach()

# the real model's backward through the gradient sync: overlap and bits
add_executable(test_grad_overlap ${CLOZE_TEST_DIR}/test_grad_overlap.c)
target_link_libraries(test_grad_overlap PRIVATE cloze)
foreach(np 2 3)
  cloze_add_mpi_test(test_grad_overlap_np${np} ${np} test_grad_overlap TIMEOUT 120)
endforeach()

cloze_add_unit_test(test_optim)
cloze_add_script_test(test_optim_torch COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/test_optim_torch.py
                      LABELS python TIMEOUT 120)

add_executable(test_optim_dist ${CLOZE_TEST_DIR}/test_optim_dist.c)
target_link_libraries(test_optim_dist PRIVATE cloze)
foreach(np 1 2 3 4 5)
  cloze_add_mpi_test(test_optim_dist_np${np} ${np} test_optim_dist TIMEOUT 120)
endforeach()

# The optimizer's AVX-512 path against its scalar definition, and the step
# with 1, 2 and 3 threads (one rank; the test sets the thread counts itself).
add_executable(test_optim_fast ${CLOZE_TEST_DIR}/test_optim_fast.c)
target_link_libraries(test_optim_fast PRIVATE cloze)
cloze_add_mpi_test(test_optim_fast 1 test_optim_fast TIMEOUT 120)
