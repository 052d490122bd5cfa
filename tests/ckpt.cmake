# ckpt: the checkpoint container (write, read, verify, scan, prune, the
# background writer) and the cloze-ckpt program on it.
cloze_add_unit_test(test_ckpt)
add_dependencies(test_ckpt cloze-ckpt) # it runs the cloze-ckpt program
# Hugging Face directories that are hostile or broken (import-hf, the
# safetensors header against config.json before allocating) and
# model.init_from's errors said once on 2 ranks (issue 46)
add_executable(ckpt_poison ${CLOZE_TEST_DIR}/ckpt_poison.c) # a NaN in a checkpoint's params
target_link_libraries(ckpt_poison PRIVATE cloze)
cloze_add_script_test(test_hf_import_faults COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_hf_import_faults.sh
                      LABELS "mpi" TIMEOUT 300)
# GPT-2's untied LM head both ways and the attention flags cloze refuses,
# with the real transformers (tests/hf/test_hf_untied.py)
cloze_add_script_test(test_hf_untied COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_hf_untied.sh
                      LABELS "python;hf" TIMEOUT 300)
