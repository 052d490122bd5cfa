# Does training work, end to end: a learning curve on shared data (slow), and
# short GPT / BERT-curriculum runs on the python3.11-doc corpus.
cloze_add_script_test(test_learning_curve COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_learning_curve.sh
                      LABELS "data;slow;mpi" TIMEOUT 900)
foreach(t train_gpt train_curriculum)
  cloze_add_script_test(test_${t} COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_${t}.sh
                        LABELS "mpi;train" TIMEOUT 300)
endforeach()
