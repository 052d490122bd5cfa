# Tokenizers (src/text) and vocabulary learning (corpus_tools/): goldens
# from other implementations on ../shared/data, round trips, learner
# determinism.
if(TARGET cloze_prep_lib)
  find_package(ZLIB REQUIRED)
  cloze_add_unit_test(test_tokenizers LIBS cloze_prep_lib ZLIB::ZLIB LABELS data TIMEOUT 120)
endif()
