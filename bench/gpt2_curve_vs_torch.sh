#!/usr/bin/env bash
# A learning curve of a small GPT-2-layout decoder (conf/gpt2-mini.cfg:
# pre-LN, final LayerNorm, GPT-2's vocabulary padded to 64) trained by
# cloze-train, against transformers' GPT2LMHeadModel (bench/gpt2_curve_torch.py,
# in the Hugging Face tests' venv, tests/scripts/hf_venv.sh) trained with the
# same recipe on the same token windows in the same order (bench-window_dump
# writes the samples cloze-train builds) and evaluated on the same held-out
# windows. Prints the held-out loss of both every EVAL_EVERY steps and the
# relative difference at each evaluation; the issue's criterion is the
# difference at steps 500, 1000 and 1500 within 2 % (exit 1 otherwise).
# The two runs differ in their random initial weights and dropout masks
# (each its own generator), not in data or recipe.
#
# usage: bench/gpt2_curve_vs_torch.sh BUILD_DIR
# env:   STEPS (1500), EVAL_EVERY (500), LAYERS (4), HIDDEN (256), HEADS (4),
#        SEQ (128), BATCH (16), MICRO (8), LR (1e-3), WARMUP (150), DROPOUT
#        (0.1), THREADS (2: both programs, one rank), SEED (1), EVAL_BATCHES
#        (32 micro-batches of held-out windows), TOL (0.02), WORK (default
#        BUILD_DIR/gpt2-curve), CORPUS (default ../shared/data's WikiText-2
#        and Gutenberg books), GPT-2's encoder.json / vocab.bpe from
#        ../shared/data/vocab/gpt2 (required). The two trainings run one
#        after the other; nothing is timed.
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/gpt2_curve_vs_torch.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$SRC/../shared/data}
STEPS=${STEPS:-1500} EVAL_EVERY=${EVAL_EVERY:-500} LAYERS=${LAYERS:-4} HIDDEN=${HIDDEN:-256}
HEADS=${HEADS:-4} SEQ=${SEQ:-128} BATCH=${BATCH:-16} MICRO=${MICRO:-8} LR=${LR:-1e-3}
WARMUP=${WARMUP:-150} DROPOUT=${DROPOUT:-0.1} THREADS=${THREADS:-2} SEED=${SEED:-1}
EVAL_BATCHES=${EVAL_BATCHES:-32} TOL=${TOL:-0.02}
WORK=${WORK:-$BUILD/gpt2-curve}
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -s "$SHARED/vocab/gpt2/encoder.json" ] || { echo "needs $SHARED/vocab/gpt2" >&2; exit 1; }
PYV=$("$SRC/tests/scripts/hf_venv.sh" "$BUILD/hf-venv") || { echo "no transformers venv" >&2; exit 1; }
CORPUS=${CORPUS:-$(ls "$SHARED"/corpus/wikitext-2-raw/* "$SHARED"/corpus/gutenberg/*)}
shards=$WORK/shards
if [ ! -s "$shards/train.manifest" ]; then
  "$BUILD/cloze-prep" shards --vocab "$SHARED/vocab/gpt2/encoder.json" \
    --merges "$SHARED/vocab/gpt2/vocab.bpe" --out "$shards" --shards 4 --heldout 0.02 \
    --quiet $CORPUS
fi
V=$(awk '$1 == "vocab" { print $3 }' "$shards/train.manifest")

echo "== cloze-train: L=$LAYERS H=$HIDDEN A=$HEADS seq $SEQ, batch $BATCH (micro $MICRO), $STEPS steps"
rm -rf "$WORK/cloze"
mpirun --bind-to none -np 1 "$BUILD/cloze-train" "$SRC/conf/gpt2-mini.cfg" --set model.vocab_size="$V" \
  --set model.layers="$LAYERS" --set model.hidden="$HIDDEN" --set model.heads="$HEADS" \
  --set model.max_positions="$SEQ" --set data.seq="$SEQ" \
  --set model.hidden_dropout="$DROPOUT" --set model.attn_dropout="$DROPOUT" \
  --set data.train_manifest="$shards/train.manifest" \
  --set data.heldout_manifest="$shards/heldout.manifest" --set train.run_dir="$WORK/cloze" \
  --set train.steps="$STEPS" --set train.global_batch="$BATCH" --set train.micro_batch="$MICRO" \
  --set train.threads="$THREADS" --set train.seed="$SEED" --set train.eval_every="$EVAL_EVERY" \
  --set train.eval_batches="$EVAL_BATCHES" --set train.ckpt_every="$STEPS" --set train.keep_last=1 \
  --set optim.lr="$LR" --set optim.warmup_steps="$WARMUP" --quiet 2>"$WORK/cloze.log" ||
  { tail -5 "$WORK/cloze.log"; exit 1; }

# the windows cloze-train used: training samples 0 .. STEPS x BATCH - 1,
# held-out samples 0 .. EVAL_BATCHES x MICRO - 1 (src/train/train.c)
"$BUILD/bench/bench-window_dump" "$shards/train.manifest" "$SEQ" "$SEED" 0 $((STEPS * BATCH)) "$WORK/train.bin"
"$BUILD/bench/bench-window_dump" "$shards/heldout.manifest" "$SEQ" "$SEED" 0 $((EVAL_BATCHES * MICRO)) "$WORK/heldout.bin"
recipe=$(awk '/^optim:/ { o = 1 } o && /min_lr_ratio|beta2|weight_decay|clip_norm/ { gsub(/[;"]/, ""); print $1 "=" $3 }' \
  "$WORK/cloze/config.cfg" | sort -u | tr '\n' ' ')
echo "   recipe from its config.cfg: $recipe"
val() { echo "$recipe" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }

echo "== GPT2LMHeadModel (transformers), the same recipe and windows"
OMP_NUM_THREADS=$THREADS "$PYV" "$SRC/bench/gpt2_curve_torch.py" --train "$WORK/train.bin" \
  --heldout "$WORK/heldout.bin" --seq "$SEQ" --vocab "$V" --layers "$LAYERS" --hidden "$HIDDEN" \
  --heads "$HEADS" --steps "$STEPS" --batch "$BATCH" --micro "$MICRO" --lr "$LR" \
  --warmup "$WARMUP" --min-lr-ratio "$(val min_lr_ratio)" --beta2 "$(val beta2)" \
  --wd "$(val weight_decay)" --clip "$(val clip_norm)" --dropout "$DROPOUT" \
  --eval-every "$EVAL_EVERY" --threads "$THREADS" --seed "$SEED" >"$WORK/torch.jsonl"

"$PYV" - "$WORK/cloze/metrics.jsonl" "$WORK/torch.jsonl" "$TOL" <<'PY'
import json, sys
ev = lambda p: {r["step"]: r["eval_lm_loss"] for r in map(json.loads, open(p)) if "eval_lm_loss" in r}
c, t, tol = ev(sys.argv[1]), ev(sys.argv[2]), float(sys.argv[3])
print("\n| step | cloze held-out loss | GPT2LMHeadModel held-out loss | rel diff |\n|---:|---:|---:|---:|")
worst = 0.0
for s in sorted(set(c) & set(t)):
    r = abs(c[s] - t[s]) / t[s]
    if s > 0:
        worst = max(worst, r)
    print(f"| {s} | {c[s]:.4f} | {t[s]:.4f} | {100 * r:.2f} % |")
print(f"\nworst after step 0: {100 * worst:.2f} % (criterion {100 * tol:.0f} %)")
sys.exit(0 if worst <= tol else 1)
PY
