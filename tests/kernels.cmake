# The kernels' and the optimizer's fast paths against their references, once
# per instruction-set copy (CLOZE_KERNELS, src/core/cpu.c): scalar (nn.c's
# loops), baseline (portable: SSE2 / NEON), avx2, avx512. A path this CPU
# cannot run exits 77 (skipped), so an AVX2-only CPU skips avx512 and an Arm
# one both x86 paths. Owner: kernels.
add_executable(test_kernels ${CLOZE_TEST_DIR}/test_kernels.c)
target_link_libraries(test_kernels PRIVATE cloze)
# the optimizer's written-out rule must not be contracted into FMAs either
set_source_files_properties(${CLOZE_TEST_DIR}/test_optim_fast.c PROPERTIES COMPILE_OPTIONS
                            "-ffp-contract=off;-fno-math-errno")
foreach(isa scalar baseline avx2 avx512)
  add_test(NAME test_kernels_${isa} COMMAND test_kernels)
  set_tests_properties(test_kernels_${isa} PROPERTIES LABELS "unit;kernels" TIMEOUT 120
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${CLOZE_TEST_ENV};CLOZE_KERNELS=${isa}")
  if(NOT isa STREQUAL "scalar") # the optimizer's scalar path is its baseline copy
    cloze_add_mpi_test(test_optim_fast_${isa} 1 test_optim_fast TIMEOUT 120 LABELS kernels)
    set_tests_properties(test_optim_fast_${isa} PROPERTIES ENVIRONMENT
                         "${CLOZE_TEST_ENV};CLOZE_KERNELS=${isa}")
  endif()
endforeach()
