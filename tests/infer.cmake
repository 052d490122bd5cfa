# Inference (src/infer, cloze-generate): the sampler on planted
# distributions and generation on cloze's own GPT models (the cache against
# recomputing, seeds, greedy).
cloze_add_unit_test(test_infer TIMEOUT 120)
