# cloze-prep: text handling (unit), end-to-end shards (script), and the same on
# ../shared/data (label "data", skipped when absent).
if(TARGET cloze_prep_lib)
  cloze_add_unit_test(test_prep_text LIBS cloze_prep_lib)
endif()
if(TARGET cloze-prep)
  cloze_add_script_test(corpus_prep_e2e COMMAND bash ${CLOZE_TEST_DIR}/scripts/corpus_prep_e2e.sh
                        $<TARGET_FILE:cloze-prep> LABELS "mpi" TIMEOUT 120)
  cloze_add_script_test(corpus_prep_data COMMAND bash ${CLOZE_TEST_DIR}/scripts/corpus_prep_data.sh
                        $<TARGET_FILE:cloze-prep> LABELS "data" TIMEOUT 300)
endif()
