# Inference (src/infer, cloze-generate): the sampler on planted
# distributions and generation on cloze's own GPT models (the cache against
# recomputing, seeds, greedy).
cloze_add_unit_test(test_infer TIMEOUT 120)
# cloze-generate against the real transformers: generate() and
# BertForMaskedLM on exported and imported models, its one-line errors, and
# train.sample_every leaving a run's losses as they are
# (tests/scripts/test_generate_hf.sh, tests/hf/test_generate_hf.py)
cloze_add_script_test(test_generate_hf COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_generate_hf.sh
                      LABELS "python;hf;mpi" TIMEOUT 600)
