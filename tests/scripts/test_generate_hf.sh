#!/usr/bin/env bash
# cloze-generate against the real transformers (4.38.2 in the venv of
# hf_venv.sh; skipped with the reason when it cannot be made):
#   * a GPT-2-layout (pre-LN) and a GPT-1 (post-LN) model trained 6 steps on
#     a learned byte-level BPE, with train.sample_every = 2 and without:
#     the same losses and gradient norms to the printed digit, samples.jsonl
#     holds steps 2, 4, 6, and the log prints them;
#   * their checkpoints: greedy generation of 50 new tokens equals
#     transformers' generate(do_sample=False) on the export, the prompt's ids
#     equal AutoTokenizer's and the printed text equals its decode (exact
#     bytes); the same with the key-value cache off;
#   * a random GPT2LMHeadModel and OpenAIGPTLMHeadModel (weights at std
#     0.3, so that the greedy continuation varies) imported with
#     cloze-ckpt import-hf: the same 50 greedy tokens as generate();
#   * a seed repeats a sample (and on 2 threads), another seed changes it;
#   * a BERT trained 6 steps, exported, and a random BertForPreTraining
#     (std 0.3) imported: fill-mask's top-5 ids and probabilities equal
#     BertForMaskedLM's softmax within 1e-5 (and 1e-4 relative);
#   * train.sample_every on a BERT: one line, no run directory left;
#   * bad input (a BERT given to generation, a GPT to fill-mask, a prompt as
#     long as the context, an id outside the vocabulary, a text without
#     [MASK]): one line on stderr, exit 1.
# Comparisons: tests/hf/test_generate_hf.py.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
PYV=$("$SRC/tests/scripts/hf_venv.sh" "$BIN/hf-venv") || exit $?
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
work=$(mktemp -d /tmp/cloze-generate-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
fail() { echo "FAIL: $*"; exit 1; }
G=$BIN/cloze-generate
T=$SRC/tests/hf/test_generate_hf.py
hf() { "$PYV" "$T" "$@" 2> >(grep -v -i 'warn\|^ *warnings\.' >&2); }
# the comparisons, run at the end by one interpreter (tab-separated lines)
checks=$work/checks.txt
: >"$checks"
check() { local IFS=$'\t'; echo "$*" >>"$checks"; }
last_ckpt() { ls "$1"/ckpt-*.lz4 | tail -1; }
V=$(bpe_shards "$data/corpus.txt" "$work")
man=$work/shards/train.manifest

gpt() { # gpt RUN_DIR CFG [--set ...]
  local dir=$1 cfg=$2; shift 2
  mpi 1 "$BIN/cloze-train" "$SRC/conf/$cfg" --set model.vocab_size="$V" \
    --set model.layers=2 --set model.hidden=32 --set model.heads=2 --set model.max_positions=64 \
    --set data.seq=32 --set data.train_manifest="$man" --set train.run_dir="$dir" \
    --set train.steps=6 --set train.global_batch=4 --set train.micro_batch=4 \
    --set train.threads=1 --set train.eval_every=0 --set train.peak_gflops=10 \
    --set optim.lr=3e-3 --set optim.warmup_steps=2 "$@" 2>"$dir.log" ||
    { cat "$dir.log"; fail "cloze-train $dir"; }
}

text="The Python interpreter is"
for kind in gpt2 gpt1; do
  cfg=$([ $kind = gpt2 ] && echo gpt2-mini.cfg || echo gpt-mini.cfg)
  gpt "$work/$kind" "$cfg" --set train.sample_every=2 --set train.sample_tokens=8
  gpt "$work/$kind-off" "$cfg" --quiet
  $PY "$SRC/tests/scripts/compare_metrics.py" "$work/$kind/metrics.jsonl" \
    "$work/$kind-off/metrics.jsonl" --exact --fields loss,lm_loss,grad_norm ||
    fail "$kind: train.sample_every changed the run's numbers"
  steps=$($PY -c 'import json,sys; print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1])))' \
    "$work/$kind/samples.jsonl")
  [ "$steps" = "2 4 6" ] || fail "$kind: samples.jsonl has steps '$steps', expected '2 4 6'"
  [ "$(grep -c 'sample:' "$work/$kind.log")" = 3 ] || fail "$kind: the log does not print 3 samples"
  [ ! -e "$work/$kind-off/samples.jsonl" ] || fail "$kind: samples written with train.sample_every = 0"
  echo "$kind: train.sample_every = 2: samples at steps $steps, the same losses as without"

  ck=$(last_ckpt "$work/$kind")
  "$BIN/cloze-ckpt" export-hf "$ck" "$work/$kind-hf" >/dev/null || fail "export-hf $kind"
  "$G" "$ck" --prompt "$text" --greedy --max-new-tokens 50 --ignore-eos --ids >"$work/$kind.ids"
  "$G" "$ck" --prompt "$text" --greedy --max-new-tokens 50 --ignore-eos --ids --no-cache |
    cmp -s - "$work/$kind.ids" || fail "$kind: --no-cache gives other tokens than the cache"
  "$G" "$ck" --prompt "$text" --greedy --max-new-tokens 50 --ignore-eos >"$work/$kind.txt"
  check prompt "$work/$kind-hf" "$work/$kind.ids" 50 "$text"
  check greedy "$work/$kind-hf" "$work/$kind.ids" 50 1
  check decode "$work/$kind-hf" "$work/$kind.ids" "$work/$kind.txt"
done

# random models saved by transformers, imported
hf make-random "$V" gpt2 "$work/r-gpt2" gpt1 "$work/r-gpt1" || fail "random models"
for kind in gpt2 gpt1; do
  "$BIN/cloze-ckpt" import-hf "$work/r-$kind" "$work/r-$kind.lz4" >/dev/null || fail "import-hf $kind"
  "$G" "$work/r-$kind.lz4" --prompt-ids "5 17 300 42 7" --greedy --max-new-tokens 50 \
    --ignore-eos --ids >"$work/r-$kind.ids"
  "$G" "$work/r-$kind.lz4" --prompt-ids "5 17 300 42 7" --temperature 0 --max-new-tokens 50 \
    --ignore-eos --ids --no-cache | cmp -s - "$work/r-$kind.ids" ||
    fail "random $kind: temperature 0 without the cache differs from --greedy with it"
  check greedy "$work/r-$kind" "$work/r-$kind.ids" 50 3
done

# seeds
ck=$(last_ckpt "$work/gpt2")
s1=$("$G" "$ck" --prompt "$text" --seed 7 --top-k 40 --max-new-tokens 30 --ignore-eos --ids)
s2=$("$G" "$ck" --prompt "$text" --seed 7 --top-k 40 --max-new-tokens 30 --ignore-eos --ids --threads 2)
s3=$("$G" "$ck" --prompt "$text" --seed 8 --top-k 40 --max-new-tokens 30 --ignore-eos --ids)
[ "$s1" = "$s2" ] || fail "--seed 7 gave two different samples (1 and 2 threads)"
[ "$s1" != "$s3" ] || fail "--seed 7 and --seed 8 gave the same sample"
echo "seeds: --seed 7 repeats its sample (1 and 2 threads), --seed 8 draws another"

# BERT fill-mask
mpi 1 "$BIN/cloze-train" $(tiny_args "$data" "$work/bert") --set train.steps=6 \
  --set train.global_batch=8 --set train.micro_batch=8 2>"$work/bert.log" ||
  { cat "$work/bert.log"; fail "cloze-train bert"; }
bert=$(last_ckpt "$work/bert")
# train.sample_every on a BERT: refused before the first step, said once,
# the run directory left as it was (none)
rc=0
mpi 2 "$BIN/cloze-train" $(tiny_args "$data" "$work/bert-sample") --set train.steps=4 \
  --set train.global_batch=8 --set train.micro_batch=4 --set train.sample_every=1 \
  2>"$work/bert-sample.log" || rc=$?
[ "$rc" != 0 ] || fail "train.sample_every on a BERT was not refused"
[ "$(grep -c 'error:' "$work/bert-sample.log")" = 1 ] &&
  grep -q 'samples need a GPT' "$work/bert-sample.log" ||
  { cat "$work/bert-sample.log"; fail "train.sample_every on a BERT: not one line naming the problem"; }
[ ! -e "$work/bert-sample" ] || fail "train.sample_every on a BERT left $work/bert-sample behind"
echo "train.sample_every on a BERT: $(grep 'error:' "$work/bert-sample.log")"
"$BIN/cloze-ckpt" export-hf "$bert" "$work/bert-hf" >/dev/null || fail "export-hf bert"
mtext="The [MASK] can be used as a [MASK]."
"$G" fill-mask "$bert" "$mtext" --top-k 5 --ids >"$work/fill.txt" || fail "fill-mask"
cat "$work/fill.txt"
check fill-mask "$work/bert-hf" "$mtext" "$work/fill.txt" 5
# a random BertForPreTraining (std 0.3: probabilities far from uniform) with
# the export's tokenizer files, imported
BV=$(grep -c '' "$data/vocab.txt")
hf make-random "$BV" bert "$work/r-bert" || fail "a random BERT"
cp "$work/bert-hf"/{vocab.txt,tokenizer_config.json,special_tokens_map.json} "$work/r-bert/"
"$BIN/cloze-ckpt" import-hf "$work/r-bert" "$work/r-bert.lz4" >/dev/null || fail "import-hf bert"
"$G" fill-mask "$work/r-bert.lz4" "$mtext" --top-k 5 --ids >"$work/r-fill.txt" || fail "fill-mask"
cat "$work/r-fill.txt"
check fill-mask "$work/r-bert" "$mtext" "$work/r-fill.txt" 5

# bad input: one line, exit 1
bad() { # bad WHAT PATTERN -- ARGS...
  local what=$1 pat=$2 rc=0; shift 3
  "$G" "$@" >"$work/bad.out" 2>"$work/bad.err" || rc=$?
  [ "$rc" = 1 ] || { cat "$work/bad.err"; fail "$what: exit $rc, expected 1"; }
  [ "$(wc -l <"$work/bad.err")" = 1 ] || { cat "$work/bad.err"; fail "$what: not one line"; }
  grep -q "$pat" "$work/bad.err" || { cat "$work/bad.err"; fail "$what: the line does not say '$pat'"; }
  echo "$what: $(cat "$work/bad.err")"
}
long=$(seq -s ' ' 1 64)
bad "a BERT given to generation" "is a BERT model" -- "$bert" --prompt "$text"
bad "a GPT given to fill-mask" "is a GPT model" -- fill-mask "$ck" "a [MASK] here"
bad "a prompt as long as the context" "the prompt is 64 tokens" -- "$ck" --prompt-ids "$long"
bad "an id outside the vocabulary" "outside the model's vocabulary" -- "$ck" --prompt-ids "1 $V 2"
bad "a text without [MASK]" "no \[MASK\]" -- fill-mask "$bert" "nothing to fill"
hf checks "$checks" || fail "a comparison with transformers"
echo "test_generate_hf: ok"
