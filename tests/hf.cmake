# Hugging Face interoperability (owner: fine-tuning): export / import with
# cloze-ckpt, checked against the real transformers from PyPI in a venv under
# the build directory (tests/scripts/hf_venv.sh; skipped when it cannot be
# made). hf_dump runs a checkpoint's model on a batch for the comparison.
add_executable(hf_dump ${CLOZE_TEST_DIR}/hf_dump.c)
target_link_libraries(hf_dump PRIVATE cloze)
cloze_add_script_test(test_hf_interop COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_hf_interop.sh
                      LABELS "python;hf;mpi" TIMEOUT 600)
# GPT-2's layout: export to GPT2LMHeadModel and import of one saved by
# transformers (tests/scripts/test_gpt2_hf.sh, tests/hf/test_gpt2_hf.py)
cloze_add_script_test(test_gpt2_hf COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_gpt2_hf.sh
                      LABELS "python;hf;mpi" TIMEOUT 600)
