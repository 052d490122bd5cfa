# The lists the docs give against the code that makes them: the fuzz
# harnesses (docs/reliability.md), the configuration keys (docs/config.md,
# and every key the docs name), the sweep report's tables and figures
# (docs/sweeps.md), the programs' options (their --help), and no commit
# hash or dated run in a reference page (every docs/*.md that is not a log;
# dates only in a table marked <!-- dated table -->; those belong in the
# *-log.md pages); the self-test
# plants each drift in a copy of the docs and requires that it is caught.
cloze_add_script_test(check_docs
  COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/check_docs.py ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
  LABELS lint TIMEOUT 120)
cloze_add_script_test(check_docs_selftest
  COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/check_docs.py --self-test ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
  LABELS lint TIMEOUT 300)
