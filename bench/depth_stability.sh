#!/usr/bin/env bash
# Stability at depth, the reason for GPT-2's layout: the same small-width,
# deep decoder trained with GPT-1's recipe (conf/gpt1.cfg: AdamW lr 2.5e-4,
# weight decay 0.01, linear warm-up then cosine to 0, dropout 0.1, N(0,0.02)
# init) on the same data for the same steps, once post-LN (model.layout =
# post_ln, GPT-1's blocks) and once pre-LN (pre_ln, GPT-2's blocks, final
# LayerNorm, residual projections at 0.02 / sqrt(2L)). Xiong et al. 2020 ("On
# Layer Normalization in the Transformer Architecture") predict that the
# post-LN stack needs a long warm-up and diverges or trains worse as it gets
# deep; this script measures it. It prints the training loss every
# STEPS/10 steps, the held-out loss and perplexity at the end, the
# non-finite steps skipped, and writes both metrics.jsonl under WORK.
#
# usage: bench/depth_stability.sh BUILD_DIR
# env:   LAYERS (24), HIDDEN (128), HEADS (4), SEQ (128), BATCH (32 sequences
#        per step), STEPS (2000), WARMUP (200 warm-up steps: GPT-1's 2000
#        scaled to a short run; give 2000 with STEPS >= 20000 for GPT-1's),
#        LR (2.5e-4), RANKS (1), THREADS (0 = the CPUs allowed / RANKS),
#        SEED (1), EVAL_SAMPLES (256 held-out windows per evaluation), WORK (scratch, default BUILD_DIR/depth-stability),
#        CORPUS (text files; default ../shared/data/corpus/wikitext-2-raw/*
#        and gutenberg/*), VOCAB / MERGES (GPT-2's encoder.json / vocab.bpe
#        from ../shared/data/vocab/gpt2; else a 8000-token BPE is learned
#        from the corpus).
# Both runs use the same shards, seed and samples; the runs are one after
# the other, never side by side. Timings are not the point: the machine may
# be shared, and nothing here is timed.
set -euo pipefail
BUILD=${1:?usage: bench/depth_stability.sh BUILD_DIR}
SRC=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$SRC/../shared/data}
LAYERS=${LAYERS:-24} HIDDEN=${HIDDEN:-128} HEADS=${HEADS:-4} SEQ=${SEQ:-128}
BATCH=${BATCH:-32} STEPS=${STEPS:-2000} WARMUP=${WARMUP:-200} LR=${LR:-2.5e-4}
RANKS=${RANKS:-1} THREADS=${THREADS:-0} SEED=${SEED:-1} EVAL_SAMPLES=${EVAL_SAMPLES:-256}
WORK=${WORK:-$BUILD/depth-stability}
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

if [ -z "${CORPUS:-}" ]; then
  CORPUS=$(ls "$SHARED"/corpus/wikitext-2-raw/* "$SHARED"/corpus/gutenberg/* 2>/dev/null || true)
  [ -n "$CORPUS" ] || { echo "depth_stability: no corpus (set CORPUS=files)" >&2; exit 1; }
fi
if [ -z "${VOCAB:-}" ] && [ -s "$SHARED/vocab/gpt2/encoder.json" ]; then
  VOCAB=$SHARED/vocab/gpt2/encoder.json MERGES=$SHARED/vocab/gpt2/vocab.bpe
fi
if [ -z "${VOCAB:-}" ]; then
  VOCAB=$WORK/encoder.json MERGES=$WORK/vocab.bpe
  [ -s "$VOCAB" ] || "$BUILD/cloze-prep" vocab --kind bpe --size 8000 --out "$VOCAB" \
    --merges-out "$MERGES" $CORPUS
fi
shards=$WORK/shards
if [ ! -s "$shards/train.manifest" ]; then
  "$BUILD/cloze-prep" shards --vocab "$VOCAB" --merges "$MERGES" --out "$shards" --shards 4 \
    --heldout 0.02 --quiet $CORPUS
fi
V=$(awk '$1 == "vocab" { print $3 }' "$shards/train.manifest")
micro=$BATCH
while [ $((micro * SEQ)) -gt 4096 ] && [ $((micro % 2)) = 0 ]; do micro=$((micro / 2)); done
[ $((micro % RANKS)) = 0 ] || micro=$RANKS
per_rank=$((micro / RANKS > 0 ? micro / RANKS : 1))
# train.eval_batches counts micro-batches of all ranks together (src/train/train.c)
eval_batches=$((EVAL_SAMPLES / per_rank > 0 ? EVAL_SAMPLES / per_rank : 1))

for layout in post_ln pre_ln; do
  run=$WORK/$layout
  rm -rf "$run"
  echo "== $layout: L=$LAYERS H=$HIDDEN A=$HEADS seq $SEQ, $BATCH x $SEQ tokens/step, $STEPS steps, warm-up $WARMUP, lr $LR"
  mpirun --oversubscribe --bind-to none -np "$RANKS" "$BUILD/cloze-train" "$SRC/conf/gpt1.cfg" \
    --set model.layout=$layout --set model.vocab_size="$V" --set model.vocab_pad_to=64 \
    --set model.layers="$LAYERS" --set model.hidden="$HIDDEN" --set model.heads="$HEADS" \
    --set model.intermediate=0 --set model.max_positions="$SEQ" --set data.seq="$SEQ" \
    --set data.train_manifest="$shards/train.manifest" \
    --set data.heldout_manifest="$shards/heldout.manifest" \
    --set train.run_dir="$run" --set train.steps="$STEPS" --set train.global_batch="$BATCH" \
    --set train.micro_batch="$per_rank" \
    --set train.threads="$THREADS" --set train.seed="$SEED" \
    --set train.eval_every=$((STEPS / 4 > 0 ? STEPS / 4 : 1)) --set train.eval_batches="$eval_batches" \
    --set train.ckpt_every="$STEPS" --set train.keep_last=1 \
    --set optim.lr="$LR" --set optim.warmup_steps="$WARMUP" --quiet 2>"$run.log" ||
    echo "   (cloze-train exited non-zero: see $run.log)"
done

python3 - "$WORK" "$STEPS" <<'PY'
import json, math, os, sys
work, steps = sys.argv[1], int(sys.argv[2])
def load(layout):
    p = os.path.join(work, layout, "metrics.jsonl")
    recs = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
    train = {r["step"]: r["lm_loss"] for r in recs if "lm_loss" in r and "loss" in r}
    evals = {r["step"]: r["eval_lm_loss"] for r in recs if "eval_lm_loss" in r}
    bad = sum(1 for v in train.values() if not math.isfinite(v))
    return train, evals, bad
runs = {k: load(k) for k in ("post_ln", "pre_ln")}
marks = sorted({max(1, steps * i // 10) for i in range(11)})
fmt = lambda v: "-" if v is None else ("nan" if not math.isfinite(v) else f"{v:.4f}")
print("\n| step | post-LN train loss | pre-LN train loss |\n|---:|---:|---:|")
for s in marks:
    print(f"| {s} | {fmt(runs['post_ln'][0].get(s))} | {fmt(runs['pre_ln'][0].get(s))} |")
print("\n| | post-LN | pre-LN |\n|---|---:|---:|")
for s in sorted(set(runs["post_ln"][1]) | set(runs["pre_ln"][1])):
    a, b = runs["post_ln"][1].get(s), runs["pre_ln"][1].get(s)
    print(f"| held-out loss at step {s} | {fmt(a)} | {fmt(b)} |")
print(f"| non-finite training losses | {runs['post_ln'][2]} | {runs['pre_ln'][2]} |")
last = {k: max(v[0]) if v[0] else 0 for k, v in runs.items()}
print(f"| last step reached (of {steps}; a run stops after train.max_bad_steps non-finite steps) "
      f"| {last['post_ln']} | {last['pre_ln']} |")
PY
