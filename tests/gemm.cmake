# GEMM: cz_gemm vs the double loops, kernel choice from CPUID, 1 vs 2 threads.
# BLIS fixes its configuration per process, so each choice (cloze's CPUID
# rule, BLIS's own choice, AVX-512 skx forced) runs as its own process.
cloze_add_unit_test(test_gemm TIMEOUT 120)
foreach(mode default avx512)
  add_test(NAME test_gemm_${mode} COMMAND test_gemm ${mode})
  set_tests_properties(test_gemm_${mode} PROPERTIES LABELS "unit" TIMEOUT 120
                       ENVIRONMENT "${CLOZE_TEST_ENV}" SKIP_RETURN_CODE 77)
endforeach()
# bf16 mode (vdpbf16ps): vs its definition and the fp32 loops, 1 vs 2 threads
# bitwise; skipped where the CPU lacks AVX512_BF16.
cloze_add_unit_test(test_gemm_bf16 TIMEOUT 120)
