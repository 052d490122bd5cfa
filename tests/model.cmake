# model and safetensors tests (owner: model helper); the kernels' own tests
# are in kernels.cmake
cloze_add_unit_test(test_model_gradcheck TIMEOUT 120)
cloze_add_unit_test(test_model_overfit TIMEOUT 120)
cloze_add_unit_test(test_model_safetensors TIMEOUT 60)
cloze_add_unit_test(test_model_recompute TIMEOUT 60)

# The PyTorch comparison: model_dump writes weights, batch, loss and grads;
# tests/reference/model_reference.py recomputes them in plain torch.
add_executable(model_dump ${CLOZE_TEST_DIR}/model_dump.c)
target_link_libraries(model_dump PRIVATE cloze)
if(CLOZE_PYTHON)
  cloze_add_script_test(model_reference
    COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/reference/model_reference.py $<TARGET_FILE:model_dump>
    LABELS python TIMEOUT 300)
endif()
# GPT-2's layout (model.layout = pre_ln, padded vocabulary) against
# transformers.GPT2LMHeadModel in the Hugging Face venv (hf_venv.sh)
cloze_add_script_test(gpt2_reference
  COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_gpt2_reference.sh $<TARGET_FILE:model_dump>
  LABELS "python;hf" TIMEOUT 600)
# µP (model.parametrization = mup) against Microsoft's mup package: initial
# scales, lr / wd and output multipliers, loss, gradients, 10 MuAdamW steps
# (tests/reference/mup_reference.py in a venv with mup, mup_venv.sh)
cloze_add_script_test(mup_reference
  COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_mup_reference.sh $<TARGET_FILE:model_dump>
  LABELS python TIMEOUT 300)
# every product in bf16 mode vs fp32 and vs the bf16 definition (skipped
# where the CPU lacks AVX512_BF16)
cloze_add_unit_test(test_model_bf16 TIMEOUT 60)
# the fine-tuning heads: finite differences, loss from the logits, layouts
cloze_add_unit_test(test_model_heads TIMEOUT 120)
# GPT-2's layout trained end to end: 1 / 2 ranks x 1 / 2 threads, recompute,
# bf16: the same losses and final parameters (tests/scripts/test_train_gpt2.sh)
cloze_add_script_test(test_train_gpt2 COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_train_gpt2.sh
                      LABELS "mpi;train" TIMEOUT 600)
