# fine-tuning (owner: fine-tuning): task readers, features, metrics
cloze_add_unit_test(test_finetune_data LIBS cloze_finetune LABELS data TIMEOUT 120)
# end to end on mpirun: rank layouts, resume, grid, SQuAD / tagging / GPT, features
cloze_add_script_test(test_finetune COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_finetune.sh
                      LABELS "mpi;finetune" TIMEOUT 600)
