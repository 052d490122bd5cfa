# docs/architecture.md's module table against the code: include order, MPI
# only in comm, no ../shared; the self-test plants each mistake in a copy of
# the tree and requires that it is caught.
cloze_add_script_test(check_layering
  COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/check_layering.py ${PROJECT_SOURCE_DIR}
  LABELS lint TIMEOUT 120)
cloze_add_script_test(check_layering_selftest
  COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/check_layering.py --self-test ${PROJECT_SOURCE_DIR}
  LABELS lint TIMEOUT 120)
