# fine-tuning (owner: fine-tuning): task readers, features, metrics
cloze_add_unit_test(test_finetune_data LABELS data TIMEOUT 120)
# end to end on mpirun: rank layouts, resume, grid, SQuAD / tagging / GPT, features
cloze_add_script_test(test_finetune COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_finetune.sh
                      LABELS "mpi;finetune" TIMEOUT 600)
# the classification heads against an independent float64 PyTorch reference
add_executable(head_dump ${CLOZE_TEST_DIR}/head_dump.c)
target_link_libraries(head_dump PRIVATE cloze)
if(CLOZE_PYTHON)
  cloze_add_script_test(head_reference
    COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/reference/head_reference.py $<TARGET_FILE:head_dump>
    LABELS python TIMEOUT 120)
endif()
# predict and run --test: scores equal run's, files in the official formats,
# unlabelled inputs, truncation counted, errors said once
cloze_add_script_test(test_finetune_predict
                      COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_finetune_predict.sh
                      LABELS "mpi;finetune" TIMEOUT 600)
# fine-tuning on GPT-2's layout (pre-LN, padded vocabulary): initialisation,
# classification with the auxiliary LM loss, multiple choice on 1 and 2 ranks
cloze_add_script_test(test_finetune_gpt2 COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_finetune_gpt2.sh
                      LABELS "mpi;finetune" TIMEOUT 600)
# --exact (dist.exact): a fine-tuning run on 1, 2 and 3 ranks (uneven), its
# grid and predict give the same metrics, dev and test results and bytes of
# checkpoint; without --exact 1 and 3 ranks differ
cloze_add_script_test(test_finetune_exact
                      COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_finetune_exact.sh
                      LABELS "mpi;finetune" TIMEOUT 600)
# a sweep point pre-trained with dist.exact = true fine-tunes with --exact:
# the same one-point sweep on 1 and 2 ranks, the same fine-tuned params
cloze_add_script_test(test_finetune_exact_sweep
                      COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_finetune_exact_sweep.sh
                      LABELS "mpi;sweep;finetune" TIMEOUT 300)
