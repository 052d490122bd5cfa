# GEMM: cz_gemm vs the double loops, kernel choice from CPUID, 1 vs 2 threads.
# BLIS fixes its configuration per process, so the CPUID choice and BLIS's
# own choice run as two processes.
cloze_add_unit_test(test_gemm TIMEOUT 120)
add_test(NAME test_gemm_blis_default COMMAND test_gemm default)
set_tests_properties(test_gemm_blis_default PROPERTIES LABELS "unit" TIMEOUT 120
                     ENVIRONMENT "${CLOZE_TEST_ENV}" SKIP_RETURN_CODE 77)
