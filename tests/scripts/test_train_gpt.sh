#!/usr/bin/env bash
# GPT end to end: a byte-level BPE vocabulary learned from the corpus, shards,
# a small GPT-mini trained for 20 steps as 1 rank x accumulation 2 and as
# 2 ranks x 1: the same losses (rank-layout independence holds for GPT too),
# and the final evaluation reports a held-out perplexity.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-gpt-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
vocab_size=$(bpe_shards "$data/corpus.txt" "$work")
grep -q '^vocab bpe ' "$work/shards/train.manifest" || { echo "FAIL: manifest is not BPE"; exit 1; }
gpt() {
  echo "$SRC/conf/gpt-mini.cfg" --set model.vocab_size=$vocab_size \
    --set model.layers=2 --set model.hidden=32 --set model.heads=2 --set model.max_positions=32 \
    --set data.seq=32 --set data.train_manifest="$work/shards/train.manifest" \
    --set data.heldout_manifest="$work/shards/heldout.manifest" \
    --set train.run_dir="$1" --set train.steps=20 --set train.global_batch=4 \
    --set train.micro_batch=2 --set train.threads=1 --set train.eval_every=0 \
    --set train.eval_batches=4 --set train.peak_gflops=10 --set optim.lr=1e-3 \
    --set optim.warmup_steps=3
}
mpi 1 "$BIN/cloze-train" $(gpt "$work/np1") 2> "$work/np1.log" || { cat "$work/np1.log"; exit 1; }
mpi 2 "$BIN/cloze-train" $(gpt "$work/np2") 2> "$work/np2.log" || { cat "$work/np2.log"; exit 1; }
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/np1/metrics.jsonl" "$work/np2/metrics.jsonl" \
  --rel 1e-5 --fields loss,lm_loss,grad_norm
grep -q "held-out LM loss .* perplexity" "$work/np2.log" || { echo "FAIL: no perplexity line"; cat "$work/np2.log"; exit 1; }
$PY - "$work/np2/metrics.jsonl" "$vocab_size" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if "lm_loss" in r and "loss" in r]
ppl = [r["eval_ppl"] for r in recs if "eval_ppl" in r]
assert len(steps) == 20, f"{len(steps)} step records"
# the run learns: the final held-out perplexity is below the vocabulary size
# (a uniform guess) and the training loss fell
assert ppl and 1 < ppl[-1] < int(sys.argv[2]), f"held-out perplexity {ppl}"
assert steps[-1]["lm_loss"] < steps[0]["lm_loss"], "LM loss did not fall"
print(f"gpt: ok (held-out perplexity {ppl[0]:.1f} -> {ppl[-1]:.1f})")
PY
echo "test_train_gpt: ok"
