#!/usr/bin/env bash
# cloze's pre-LN GPT (GPT-2's layout, padded vocabulary) against
# transformers.GPT2LMHeadModel: loss, every gradient, 10 AdamW steps
# (tests/reference/gpt2_reference.py), in the venv of the Hugging Face tests
# (hf_venv.sh; skipped with its reason when it cannot be made).
#   test_gpt2_reference.sh MODEL_DUMP
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
PYV=$("$SRC/tests/scripts/hf_venv.sh" "$BIN/hf-venv") || exit $?
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$PYV" "$SRC/tests/reference/gpt2_reference.py" "${1:?usage: test_gpt2_reference.sh MODEL_DUMP}"
