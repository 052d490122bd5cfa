# cloze-prep: text handling (unit), end-to-end shards (script), and the same on
# ../shared/data (label "data", skipped when absent).
if(TARGET cloze_prep_lib)
  cloze_add_unit_test(test_prep_text LIBS cloze_prep_lib)
  # verify's checks on planted mistakes; the ranks' agreement on 2 ranks
  cloze_add_unit_test(test_prep_verify LIBS cloze_prep_lib LABELS prep)
  cloze_add_mpi_test(test_prep_verify_np2 2 test_prep_verify ARGS --mpi LABELS prep TIMEOUT 120)
endif()
if(TARGET cloze-prep)
  cloze_add_script_test(corpus_prep_e2e COMMAND bash ${CLOZE_TEST_DIR}/scripts/corpus_prep_e2e.sh
                        $<TARGET_FILE:cloze-prep> LABELS "mpi" TIMEOUT 120)
  cloze_add_script_test(corpus_prep_data COMMAND bash ${CLOZE_TEST_DIR}/scripts/corpus_prep_data.sh
                        $<TARGET_FILE:cloze-prep> LABELS "data" TIMEOUT 300)
  # BERT's Wikipedia recipe of docs/data.md, as written, on the MediaWiki dump
  # excerpts with WikiExtractor 3.1.0 (a venv in the build directory; skipped
  # without ../shared or PyPI): one document per article, passages only, the
  # same shards from both of WikiExtractor's forms, no markup, no headings
  cloze_add_script_test(test_wikipedia COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_wikipedia.sh
                        LABELS "data;prep;mpi" TIMEOUT 600)
  # nothing kept (the passage rule dropped every line, or no text): one line
  # naming the rule, the count and the inputs, on 1 rank and 2 (issue 46)
  cloze_add_script_test(test_prep_no_passage COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_prep_no_passage.sh
                        $<TARGET_FILE:cloze-prep> LABELS "prep;mpi" TIMEOUT 120)
  # a new shard set replaces the old one only when complete: error, kill -9,
  # lock, replacement; and a full disk on a tmpfs the test mounts (skipped,
  # exit 77, where mounting is not allowed)
  foreach(mode swap disk-full)
    cloze_add_script_test(corpus_prep_${mode} COMMAND bash ${CLOZE_TEST_DIR}/scripts/corpus_prep_swap.sh
                          $<TARGET_FILE:cloze-prep> ${mode} LABELS "prep" TIMEOUT 120)
  endforeach()
endif()
# the venv makers under ctest -j: three at once on one new directory
cloze_add_script_test(test_venv_makers COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_venv_makers.sh
                      LABELS "python" TIMEOUT 300)
