#!/usr/bin/env bash
# Activation recomputation changes memory, not results: a small BERT trained
# for 6 steps (2 micro-batches per step, dropout 0.1, padded sequences) with
# model.recompute=layers ends with byte-identical weights and prints the same
# losses as with model.recompute=none, at 1 and 2 threads; a checkpoint
# written without recomputation resumes with it and still ends on the same
# bytes; the start-up memory plan shows the smaller activation plan.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-recompute-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
common() { tiny_args "$data" "$1"; echo --set model.layers=3 --set train.steps=6 \
  --set train.global_batch=4 --set train.micro_batch=2 --set train.ckpt_every=3; }
run() { # run DIR ARGS...: 1 rank, log in DIR.log
  local dir=$1; shift
  mpi 1 "$BIN/cloze-train" $(common "$dir") "$@" 2> "$dir.log" || { cat "$dir.log"; exit 1; }
}
run "$work/none" --set model.recompute=none
run "$work/layers" --set model.recompute=layers
run "$work/layers2" --set model.recompute=layers --set train.threads=2
# stopped at step 3 without recomputation, resumed with it
run "$work/mixed" --set model.recompute=none --set train.stop_after_steps=3
run "$work/mixed" --set model.recompute=layers --resume auto
grep -q "resumed from .*ckpt-00000003.lz4" "$work/mixed.log" || { echo "FAIL: no resume"; cat "$work/mixed.log"; exit 1; }

"$BIN/cloze-ckpt" dump-blob "$work/none/ckpt-00000006.lz4" params > "$work/p-none"
[ -s "$work/p-none" ] || { echo "FAIL: empty params blob"; exit 1; }
for r in layers layers2 mixed; do
  "$BIN/cloze-ckpt" dump-blob "$work/$r/ckpt-00000006.lz4" params > "$work/p-$r"
  cmp "$work/p-none" "$work/p-$r" || { echo "FAIL: $r weights differ from recompute=none"; exit 1; }
  $PY "$SRC/tests/scripts/compare_metrics.py" "$work/none/metrics.jsonl" \
    "$work/$r/metrics.jsonl" --exact --fields loss,mlm_loss,nsp_loss,grad_norm
done

# the start-up line names the setting
grep -q "memory plan per rank .*recompute none" "$work/none.log" || { echo "FAIL: no memory plan line"; cat "$work/none.log"; exit 1; }
grep -q "memory plan per rank .*recompute layers" "$work/layers.log" || { echo "FAIL: no memory plan line"; cat "$work/layers.log"; exit 1; }
echo "test_train_recompute: ok"
