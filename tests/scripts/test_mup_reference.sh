#!/usr/bin/env bash
# cloze's µP against Microsoft's mup package on PyTorch models with cloze's
# shapes (tests/reference/mup_reference.py), in a venv with mup 1.0.0
# (mup_venv.sh; skipped with its reason when it cannot be made).
#   test_mup_reference.sh MODEL_DUMP
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
PYV=$("$SRC/tests/scripts/mup_venv.sh" "$BIN/mup-venv") || exit $?
exec "$PYV" "$SRC/tests/reference/mup_reference.py" "${1:?usage: test_mup_reference.sh MODEL_DUMP}"
