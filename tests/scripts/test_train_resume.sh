#!/usr/bin/env bash
# Exact resume: for each optimizer placement, a run stopped after 6 of 12
# steps and resumed prints the same losses, to the last digit, as an
# uninterrupted run; the three placements give identical losses; resuming a
# 2-rank checkpoint on 1 rank (same global batch) continues the same sample
# sequence; a corrupt newest checkpoint is skipped by --resume auto; a
# checkpoint of run-state version 1 is refused, one of version 2 (the word
# embedding after the layers) is read.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-resume-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
common() { tiny_args "$data" "$1"; echo --set train.steps=12 --set train.global_batch=4 \
  --set train.micro_batch=2 --set train.ckpt_every=3 --set train.keep_last=10; }
for place in coordinator sharded replicated; do
  mpi 2 "$BIN/cloze-train" $(common "$work/full-$place") --set dist.placement=$place
  mpi 2 "$BIN/cloze-train" $(common "$work/cut-$place") --set dist.placement=$place \
    --set train.stop_after_steps=6
  [ -f "$work/cut-$place/ckpt-00000006.lz4" ] || { echo "FAIL: no checkpoint at step 6"; exit 1; }
  mpi 2 "$BIN/cloze-train" $(common "$work/cut-$place") --set dist.placement=$place --resume auto
  $PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-$place/metrics.jsonl" \
    "$work/cut-$place/metrics.jsonl" --exact --fields loss,mlm_loss,nsp_loss,grad_norm,lr
done
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-coordinator/metrics.jsonl" \
  "$work/full-sharded/metrics.jsonl" --exact --fields loss,grad_norm
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-coordinator/metrics.jsonl" \
  "$work/full-replicated/metrics.jsonl" --exact --fields loss,grad_norm
# the weights themselves: every placement's final parameters are the same bits
for place in sharded replicated; do
  "$BIN/cloze-ckpt" dump-blob "$work/full-$place/ckpt-00000012.lz4" params > "$work/p-$place"
done
"$BIN/cloze-ckpt" dump-blob "$work/full-coordinator/ckpt-00000012.lz4" params > "$work/p-coordinator"
cmp "$work/p-coordinator" "$work/p-sharded" && cmp "$work/p-coordinator" "$work/p-replicated"

# another rank count: resume the 2-rank step-6 checkpoint on 1 rank
mkdir -p "$work/one"
cp "$work/full-sharded/ckpt-00000006.lz4" "$work/one/"
mpi 1 "$BIN/cloze-train" $(common "$work/one") --set dist.placement=sharded --resume auto
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-sharded/metrics.jsonl" \
  "$work/one/metrics.jsonl" --rel 1e-5 --from 7 --fields loss,mlm_loss,nsp_loss

# a corrupt newest checkpoint: auto-resume skips it (and says so), continues from 9
cp -r "$work/full-replicated" "$work/corrupt"
f=$work/corrupt/ckpt-00000012.lz4
printf '\x00\x00\x00\x00' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc 2>/dev/null
mpi 2 "$BIN/cloze-train" $(common "$work/corrupt") --set dist.placement=replicated \
  --resume auto 2> "$work/corrupt.log" || { cat "$work/corrupt.log"; exit 1; }
grep -q "ckpt-00000012.lz4" "$work/corrupt.log" || { echo "FAIL: skipped checkpoint not named"; cat "$work/corrupt.log"; exit 1; }
grep -q "resumed from .*ckpt-00000009.lz4" "$work/corrupt.log" || { echo "FAIL: did not resume from step 9"; cat "$work/corrupt.log"; exit 1; }
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-replicated/metrics.jsonl" \
  "$work/corrupt/metrics.jsonl" --exact --fields loss

# a checkpoint of the older run-state version 1 (BERT's q/k/v parameters
# interleaved): refused with one line naming the file, exit non-zero
mkdir -p "$work/old"
"$BIN/tests/ckpt_set_version" "$work/full-sharded/ckpt-00000012.lz4" "$work/old/ckpt-00000012.lz4" 1
if mpi 1 "$BIN/cloze-train" $(common "$work/old") --resume auto 2> "$work/old.log"; then
  echo "FAIL: a version-1 BERT checkpoint was accepted"; exit 1
fi
grep -q "old/ckpt-00000012.lz4: state: version 1" "$work/old.log" ||
  { echo "FAIL: version refusal not reported"; cat "$work/old.log"; exit 1; }
# a checkpoint of run-state version 2, whose params and moments had the word
# embedding after the layers (no "layout" blob): read by moving it, so the
# resumed run continues exactly as the uninterrupted one
mkdir -p "$work/v2"
"$BIN/tests/ckpt_set_version" "$work/full-sharded/ckpt-00000006.lz4" "$work/v2/ckpt-00000006.lz4" 2 --old-layout
mpi 2 "$BIN/cloze-train" $(common "$work/v2") --set dist.placement=sharded --resume auto
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-sharded/metrics.jsonl" \
  "$work/v2/metrics.jsonl" --exact --from 7 --fields loss,mlm_loss,nsp_loss,grad_norm,lr
# not vacuous: the version-2 file's params are other bytes than today's
"$BIN/cloze-ckpt" dump-blob "$work/v2/ckpt-00000006.lz4" params > "$work/p-v2"
"$BIN/cloze-ckpt" dump-blob "$work/full-sharded/ckpt-00000006.lz4" params > "$work/p-v3"
if cmp -s "$work/p-v2" "$work/p-v3"; then echo "FAIL: the old layout is the same bytes"; exit 1; fi
echo "test_train_resume: ok"
