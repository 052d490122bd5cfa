# Fuzz harnesses (tests/fuzz/, libFuzzer runs: tests/fuzz/run.sh) replayed by
# ctest without libFuzzer: each harness with tests/fuzz/driver.c runs its
# seed corpus and every crasher found so far (tests/fuzz/crashers/<harness>/,
# fixed since) once, in the Release build and under ASan/UBSan (label unit).
if(TARGET cloze_prep_lib)
  file(GLOB CLOZE_FUZZ_HARNESSES CONFIGURE_DEPENDS ${CLOZE_TEST_DIR}/fuzz/fuzz_*.c)
  foreach(src ${CLOZE_FUZZ_HARNESSES})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src} ${CLOZE_TEST_DIR}/fuzz/driver.c)
    target_compile_definitions(${name} PRIVATE CLOZE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    target_link_libraries(${name} PRIVATE cloze_prep_lib)
    set(inputs ${CLOZE_TEST_DIR}/fuzz/seeds/${name})
    if(EXISTS ${CLOZE_TEST_DIR}/fuzz/crashers/${name})
      list(APPEND inputs ${CLOZE_TEST_DIR}/fuzz/crashers/${name})
    endif()
    add_test(NAME ${name}_regress COMMAND ${name} ${inputs})
    set_tests_properties(${name}_regress PROPERTIES LABELS "unit;fuzz" TIMEOUT 120
                         ENVIRONMENT
                         "${CLOZE_TEST_ENV};LSAN_OPTIONS=suppressions=${CLOZE_TEST_DIR}/fuzz/lsan.supp")
  endforeach()
endif()
# tests/fuzz/run.sh's triage without clang: a planted slow unit that replays
# fast is a stall, not a finding; one slow again, or a crash, fails the stage.
cloze_add_script_test(fuzz_triage_selftest
  COMMAND bash ${CLOZE_TEST_DIR}/fuzz/run.sh --self-test
  LABELS "lint;fuzz" TIMEOUT 120)
