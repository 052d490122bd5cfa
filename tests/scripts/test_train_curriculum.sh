#!/usr/bin/env bash
# BERT's two-phase length curriculum: phase2_fraction 0.5 runs steps 1-6 at
# seq 32 and steps 7-12 at phase2_seq 64 (phase2_max_pred 10); metrics.jsonl
# says so; a run stopped in phase 1 and resumed twice (once across the phase
# boundary) gives exactly the losses of an uninterrupted run.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-curriculum-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
common() { tiny_args "$data" "$1"; echo --set train.steps=12 --set train.global_batch=4 \
  --set train.micro_batch=2 --set data.phase2_fraction=0.5 --set data.phase2_seq=64 \
  --set data.phase2_max_pred=10; }
mpi 2 "$BIN/cloze-train" $(common "$work/full")
$PY - "$work/full/metrics.jsonl" <<'PY'
import json, sys
seqs = [(r["step"], r["seq"]) for r in map(json.loads, open(sys.argv[1])) if "seq" in r]
want = [(s, 32 if s <= 6 else 64) for s in range(1, 13)]
assert seqs == want, f"steps/seq {seqs}, expected {want}"
print("curriculum: seq 32 for steps 1-6, 64 for 7-12")
PY
# stop after 4 (phase 1), resume for 4 more (steps 5-8: across the boundary),
# resume to the end
mpi 2 "$BIN/cloze-train" $(common "$work/cut") --set train.stop_after_steps=4
mpi 2 "$BIN/cloze-train" $(common "$work/cut") --set train.stop_after_steps=4 --resume auto
[ -f "$work/cut/ckpt-00000008.lz4" ] || { echo "FAIL: no checkpoint at step 8"; exit 1; }
mpi 2 "$BIN/cloze-train" $(common "$work/cut") --resume auto
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/full/metrics.jsonl" "$work/cut/metrics.jsonl" \
  --exact --fields loss,mlm_loss,nsp_loss,grad_norm,lr,seq
echo "test_train_curriculum: ok"
