# Does training work, end to end: a learning curve on shared data (slow), and
# short GPT / BERT-curriculum runs on the python3.11-doc corpus.
cloze_add_script_test(test_learning_curve COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_learning_curve.sh
                      LABELS "data;slow;mpi" TIMEOUT 900)
set(CLOZE_CURVE_FINAL "${CMAKE_CURRENT_BINARY_DIR}/learning_curve_fp32_final.txt")
set_tests_properties(test_learning_curve PROPERTIES ENVIRONMENT
                     "${CLOZE_TEST_ENV};CLOZE_CURVE_FINAL=${CLOZE_CURVE_FINAL}")
foreach(t train_gpt train_curriculum)
  cloze_add_script_test(test_${t} COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_${t}.sh
                        LABELS "mpi;train" TIMEOUT 300)
endforeach()
# The same curve with every matrix product in bf16 (model.matmul_precision =
# "bf16"): it must pass the fp32 test's own assertions and end within the
# fp32 seed-to-seed noise of the fp32 run at the same seed (final held-out
# MLM accuracy and loss: those of test_learning_curve in the same ctest run
# when it ran first, else the figures measured in docs/learning-curve.md,
# "bf16 mode"; bands from the seed-to-seed spread measured there). Skipped
# where the CPU lacks AVX512_BF16.
cloze_add_script_test(test_learning_curve_bf16
                      COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_learning_curve.sh
                      LABELS "data;slow;mpi" TIMEOUT 900)
set_tests_properties(test_learning_curve_bf16 PROPERTIES DEPENDS test_learning_curve ENVIRONMENT
                     "${CLOZE_TEST_ENV};CLOZE_CURVE_MATMUL=bf16;CLOZE_CURVE_REF=0.100 6.436 0.015 0.1;CLOZE_CURVE_FINAL=${CLOZE_CURVE_FINAL}")
