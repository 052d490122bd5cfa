#!/usr/bin/env bash
# GPT-2's layout and Hugging Face's GPT2LMHeadModel, both ways, with the real
# transformers (4.38.2 in the venv of hf_venv.sh; skipped with the reason
# when it cannot be made):
#   * a pre-LN GPT (conf/gpt2-mini.cfg scaled down, vocabulary padded to 64)
#     trained 10 steps on GPT-2's byte-level BPE (../shared/data, else a
#     learned one), exported with `cloze-ckpt export-hf`: GPT2LMHeadModel and
#     AutoModelForCausalLM load it with no missing, unexpected or mismatched
#     key, the word embedding has vocab_size rows (no padding), config.json
#     has GPT2Config's fields, AutoTokenizer (GPT2Tokenizer) gives
#     cloze-prep's ids; hidden states, logits and loss equal cloze's within
#     1e-5 relative;
#   * a randomly initialised GPT2LMHeadModel (LayerNorm and biases moved off
#     1 / 0) saved by transformers, imported with `cloze-ckpt import-hf`:
#     cloze's hidden states and loss within 1e-5 of GPT2LMHeadModel's; and
#     model.init_from on the directory itself into a padded model starts
#     from the same loss.
# Comparisons: tests/hf/test_gpt2_hf.py.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
PYV=$("$SRC/tests/scripts/hf_venv.sh" "$BIN/hf-venv") || exit $?
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
work=$(mktemp -d /tmp/cloze-gpt2-hf-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
shared=${CLOZE_SHARED_DATA:-}
fail() { echo "FAIL: $*"; exit 1; }
last_ckpt() { ls "$1"/ckpt-*.lz4 | tail -1; }

if [ -n "$shared" ] && [ -s "$shared/vocab/gpt2/encoder.json" ]; then
  vocab=$shared/vocab/gpt2/encoder.json merges=$shared/vocab/gpt2/vocab.bpe
  echo "GPT-2's vocabulary from ../shared/data"
else
  learn_bpe "$data/corpus.txt" "$work"
  vocab=$work/encoder.json merges=$work/vocab.bpe
  echo "a learned BPE vocabulary (../shared/data absent)"
fi
"$BIN/cloze-prep" shards --vocab "$vocab" --merges "$merges" --out "$work/shards" \
  --shards 1 --quiet "$data/corpus.txt"
man=$work/shards/train.manifest
V=$(awk '$1 == "vocab" { print $3 }' "$man")
mpi 1 "$BIN/cloze-train" "$SRC/conf/gpt2-mini.cfg" --set model.vocab_size="$V" \
  --set model.layers=2 --set model.hidden=32 --set model.heads=2 --set model.max_positions=64 \
  --set data.seq=32 --set data.train_manifest="$man" --set train.run_dir="$work/run" \
  --set train.steps=10 --set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 \
  --set train.eval_every=0 --set train.peak_gflops=10 --set optim.lr=3e-3 \
  --set optim.warmup_steps=2 --quiet 2>"$work/run.log" || { cat "$work/run.log"; fail "cloze-train"; }
"$BIN/cloze-ckpt" export-hf "$(last_ckpt "$work/run")" "$work/export" || fail "export-hf"

# a random GPT2LMHeadModel, saved by transformers
"$PYV" "$SRC/tests/hf/test_gpt2_hf.py" make-random "$work/random" "$V" || fail "a random GPT2LMHeadModel"
"$BIN/cloze-ckpt" import-hf "$work/random" "$work/random.lz4" >"$work/import.log" || fail "import-hf"
cat "$work/import.log"
grep -q "GPT2LMHeadModel" "$work/import.log" || fail "import-hf does not name GPT2LMHeadModel"
# continued pre-training from the directory into a padded model (64) and
# from the import (no padding): the same first loss, not a fresh model's
cont() { # run_dir init_from [--set ...]
  local dir=$1 from=$2; shift 2
  mpi 1 "$BIN/cloze-train" "$SRC/conf/gpt2-mini.cfg" --set model.vocab_size="$V" \
    --set model.layers=2 --set model.hidden=48 --set model.heads=3 --set model.max_positions=64 \
    --set data.seq=32 --set data.train_manifest="$man" --set train.run_dir="$dir" \
    --set train.steps=1 --set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 \
    --set train.eval_every=0 --set train.peak_gflops=10 --set optim.warmup_steps=1 \
    --set model.hidden_dropout=0 --set model.attn_dropout=0 \
    --set model.init_from="$from" "$@" --quiet 2>"$dir.log" || { cat "$dir.log"; fail "cloze-train from $from"; }
  "$PYV" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["lm_loss"])' "$dir/metrics.jsonl"
}
l_dir=$(cont "$work/cont-dir" "$work/random")
l_ckpt=$(cont "$work/cont-ckpt" "$work/random.lz4" --set model.vocab_pad_to=0)
echo "continued pre-training, first-step LM loss: from the directory (padded) $l_dir, from the import $l_ckpt"
l_fresh=$(cont "$work/cont-fresh" "")
echo "from scratch: $l_fresh"
"$PYV" -c 'import sys; d, c, f = map(float, sys.argv[1:]); sys.exit(not (abs(d - c) <= 1e-6 * c and abs(c - f) > 1e-3))' \
  "$l_dir" "$l_ckpt" "$l_fresh" || fail "model.init_from did not start the padded model from the imported weights"

"$PYV" "$SRC/tests/hf/test_gpt2_hf.py" compare "$work" "$BIN/tests/hf_dump" "$BIN/cloze-prep" \
  "$(last_ckpt "$work/run")" "$vocab" "$merges" "$data/corpus.txt" || fail "comparisons with transformers"
echo "test_gpt2_hf: ok"
