# optim: AdamW / LAMB against their definitions and PyTorch, the three
# placements on 1-5 ranks, and the fast path of the update.
cloze_add_unit_test(test_optim)
cloze_add_script_test(test_optim_torch COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/test_optim_torch.py
                      LABELS python TIMEOUT 120)

cloze_add_mpi_tests(test_optim_dist NPS 1 2 3 4 5 TIMEOUT 120)

# The optimizer's AVX-512 path against its scalar definition, and the step
# with 1, 2 and 3 threads (one rank; the test sets the thread counts itself).
add_executable(test_optim_fast ${CLOZE_TEST_DIR}/test_optim_fast.c)
target_link_libraries(test_optim_fast PRIVATE cloze)
cloze_add_mpi_test(test_optim_fast 1 test_optim_fast TIMEOUT 120)
# the optimizer's written-out rule must not be contracted into FMAs either
set_source_files_properties(${CLOZE_TEST_DIR}/test_optim_fast.c PROPERTIES COMPILE_OPTIONS
                            "-ffp-contract=off;-fno-math-errno")
# the same once per instruction-set copy of the kernels (CLOZE_KERNELS,
# tests/kernels.cmake): a path this CPU cannot run exits 77 (skipped); the
# optimizer's scalar path is its baseline copy
foreach(isa baseline avx2 avx512)
  cloze_add_mpi_test(test_optim_fast_${isa} 1 test_optim_fast TIMEOUT 120 LABELS kernels)
  set_tests_properties(test_optim_fast_${isa} PROPERTIES ENVIRONMENT
                       "${CLOZE_TEST_ENV};CLOZE_KERNELS=${isa}")
endforeach()
