# Tokenizers and vocabulary learning (corpus_tools/): goldens from other
# implementations on ../shared/data, round trips, learner determinism.
if(TARGET cloze_prep_lib)
  find_package(ZLIB REQUIRED)
  cloze_add_unit_test(test_tokenizers LIBS cloze_prep_lib ZLIB::ZLIB LABELS data TIMEOUT 120)
endif()

# bench/CMakeLists.txt links benchmarks against `cloze` only; the tokenizer
# benchmark also needs the cloze-prep library. bench/ is added after tests/,
# so link it once the top-level directory is done.
function(cloze_link_tokenize_bench)
  if(TARGET bench-tokenize_bench AND TARGET cloze_prep_lib)
    target_link_libraries(bench-tokenize_bench PRIVATE cloze_prep_lib)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL cloze_link_tokenize_bench)
