# kernels: the nn kernels' fast paths against their references, once per
# instruction-set copy (CLOZE_KERNELS, src/core/cpu.c): scalar (nn.c's
# loops), baseline (portable: SSE2 / NEON), avx2, avx512. A path this CPU
# cannot run exits 77 (skipped), so an AVX2-only CPU skips avx512 and an Arm
# one both x86 paths. The optimizer's copy of each path: tests/optim.cmake.
add_executable(test_kernels ${CLOZE_TEST_DIR}/test_kernels.c)
target_link_libraries(test_kernels PRIVATE cloze)
foreach(isa scalar baseline avx2 avx512)
  add_test(NAME test_kernels_${isa} COMMAND test_kernels)
  set_tests_properties(test_kernels_${isa} PROPERTIES LABELS "unit;kernels" TIMEOUT 120
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${CLOZE_TEST_ENV};CLOZE_KERNELS=${isa}")
endforeach()

# GEMM: cz_gemm vs the double loops, kernel choice from CPUID, 1 vs 2 threads.
# BLIS fixes its configuration per process, so each choice (cloze's CPUID
# rule, BLIS's own choice, AVX-512 skx forced) runs as its own process.
cloze_add_unit_test(test_gemm TIMEOUT 120)
foreach(mode default avx512)
  add_test(NAME test_gemm_${mode} COMMAND test_gemm ${mode})
  set_tests_properties(test_gemm_${mode} PROPERTIES LABELS "unit" TIMEOUT 120
                       ENVIRONMENT "${CLOZE_TEST_ENV}" SKIP_RETURN_CODE 77)
endforeach()
# bf16 mode: vs its definition and the fp32 loops, 1 vs 2 threads bitwise;
# once with the kernel core's rule chooses (skipped where the CPU has
# neither AVX512_BF16 nor AMX), and once over the bf16 kernels' table
# (src/kernels/gemm_bf16.h): the program runs itself once per entry with
# CLOZE_BF16_KERNEL set to the entry's name, an entry the CPU cannot run
# skipped. amx-emulated runs everywhere: the AMX kernel's packing and loops
# with the tile instructions in scalar C. (600 s: amx-emulated's scalar
# tiles under qemu-aarch64 took 120-215 s.)
cloze_add_unit_test(test_gemm_bf16 TIMEOUT 300)
add_test(NAME test_gemm_bf16_table COMMAND test_gemm_bf16 table)
# under user emulation each entry's process is started through the emulator
string(REPLACE ";" " " cloze_emulator "${CMAKE_CROSSCOMPILING_EMULATOR}")
set_tests_properties(test_gemm_bf16_table PROPERTIES LABELS "unit;kernels" TIMEOUT 900
                     ENVIRONMENT "${CLOZE_TEST_ENV};CLOZE_TEST_EMULATOR=${cloze_emulator}")
# A kernel checks itself before it is chosen: amx-emulated forced, with an
# error planted in every product (a wrong element) or a fault (a trap where
# the tile configuration loads), must fail its check, the choice fall back
# to the next kernel with one log line, and the fallback's products be
# right (src/kernels/gemm_bf16.c, self_check; src/core/cpu.c, cz_cpu_guard).
foreach(plant error fault)
  add_test(NAME test_gemm_bf16_selfcheck_${plant} COMMAND test_gemm_bf16 fallback)
  set_tests_properties(test_gemm_bf16_selfcheck_${plant} PROPERTIES LABELS "unit;kernels"
                       TIMEOUT 300 ENVIRONMENT
                       "${CLOZE_TEST_ENV};CLOZE_BF16_KERNEL=amx-emulated;CLOZE_BF16_PLANT=${plant}")
endforeach()
