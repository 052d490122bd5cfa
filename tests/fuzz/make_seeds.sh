#!/usr/bin/env bash
# Writes the seed corpus of the fuzz harnesses, tests/fuzz/seeds/<harness>/,
# from the project's own outputs: cloze-prep shards, manifests and learned
# vocabularies made from the project's docs, a checkpoint of a tiny
# cloze-train run, its Hugging Face export (cloze-ckpt export-hf), the conf/
# files and the GPT-2 whitespace cases of tests/golden, and tiny
# hand-written fine-tuning task files. Nothing from ../shared/data. Every seed is small (the largest a few tens of KB).
#   tests/fuzz/make_seeds.sh BUILD_DIR        (a Release build of the project)
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$SRC/tests/fuzz/seeds
PY=${CLOZE_PYTHON:-python3}
T=$(mktemp -d /tmp/cloze-fuzz-seeds-XXXXXX)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$OUT"
for h in config shard manifest checkpoint safetensors json reader wikidoc bpe wordpiece vocab task hfdir; do
    mkdir -p "$OUT/fuzz_$h"
done
prefixed() { # prefixed BYTE FILE OUT: OUT = one mode byte (hex) + FILE
    { printf "\\x$1"; cat "$2"; } >"$3"
}

# ---- text: the project's own docs
cat "$SRC/README.md" "$SRC/docs/architecture.md" "$SRC/docs/formats.md" >"$T/docs.txt"
head -c 6000 "$SRC/README.md" >"$T/small.txt"

# ---- vocabularies learned from it, and shards in both modes
P=$BUILD/cloze-prep
"$P" vocab --kind wordpiece --size 300 --out "$T/vocab.txt" "$T/docs.txt" 2>/dev/null
mkdir -p "$T/bpe"
"$P" vocab --kind bpe --size 300 --out "$T/bpe/encoder.json" "$T/docs.txt" 2>/dev/null
"$P" shards --vocab "$T/vocab.txt" --out "$T/wp" --shards 2 --heldout 0.2 --quiet "$T/small.txt" 2>/dev/null
"$P" shards --vocab "$T/bpe/encoder.json" --merges "$T/bpe/vocab.bpe" --out "$T/gp" --shards 1 \
    --quiet "$T/small.txt" 2>/dev/null
# (first byte: 03 = the harness recomputes both checksums, 00 = as it is)
prefixed 03 "$T"/wp/set-0001/train-00000.bin "$OUT/fuzz_shard/wordpiece-train-0"
prefixed 00 "$T"/wp/set-0001/heldout-00000.bin "$OUT/fuzz_shard/wordpiece-heldout-0"
prefixed 03 "$T"/gp/set-0001/train-00000.bin "$OUT/fuzz_shard/gpt-train-0"
cp "$T/wp/train.manifest" "$OUT/fuzz_manifest/wordpiece-train"
cp "$T/wp/heldout.manifest" "$OUT/fuzz_manifest/wordpiece-heldout"
cp "$T/gp/train.manifest" "$OUT/fuzz_manifest/gpt-train"
grep -v '^vocab_' "$T/gp/train.manifest" >"$OUT/fuzz_manifest/gpt-train-before-vocab-records"
prefixed 00 "$T/vocab.txt" "$OUT/fuzz_vocab/wordpiece-cased"
prefixed 02 "$T/vocab.txt" "$OUT/fuzz_vocab/wordpiece-uncased"
{ printf '\x01'; cat "$T/bpe/encoder.json"; printf '\0'; cat "$T/bpe/vocab.bpe"; } >"$OUT/fuzz_vocab/bpe"
cp "$T/bpe/encoder.json" "$OUT/fuzz_json/encoder.json"

# ---- reader inputs (first byte: format % 5, bit 3 GPT mode, bit 6 field
# "body"): text, WikiText, JSON Lines and Gutenberg layouts of the docs
head -c 3000 "$SRC/docs/formats.md" >"$T/text.txt"
"$PY" - "$SRC/docs/tokenizers.md" "$T" <<'EOF'
import json, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8")][:60]
out = sys.argv[2]
with open(out + "/wiki.raw", "w") as f:  # " = Title = " articles, " = = Section = = "
    for i, l in enumerate(lines):
        if l.startswith("# "):
            f.write(" = %s = \n \n" % l[2:])
        elif l.startswith("## "):
            f.write(" = = %s = = \n \n" % l[3:])
        elif l:
            f.write(" %s \n \n" % l)
with open(out + "/docs.jsonl", "w") as f:
    for i in range(0, 40, 8):
        f.write(json.dumps({"id": i, "text": "\n".join(lines[i:i + 8]), "body": lines[i]}) + "\n")
with open(out + "/book.txt", "w") as f:
    f.write("Header\r\n*** START OF THE PROJECT GUTENBERG EBOOK CLOZE ***\r\n\r\n")
    for l in lines[:30]:
        f.write(l + "\r\n")
    f.write("*** END OF THE PROJECT GUTENBERG EBOOK CLOZE ***\r\nLicence\r\n")
EOF
prefixed 01 "$T/text.txt" "$OUT/fuzz_reader/text-bert"
prefixed 09 "$T/text.txt" "$OUT/fuzz_reader/text-gpt"
prefixed 02 "$T/wiki.raw" "$OUT/fuzz_reader/wikitext-bert"
prefixed 0a "$T/wiki.raw" "$OUT/fuzz_reader/wikitext-gpt"
prefixed 43 "$T/docs.jsonl" "$OUT/fuzz_reader/jsonl-body"
prefixed 03 "$T/docs.jsonl" "$OUT/fuzz_reader/jsonl-text"
prefixed 04 "$T/book.txt" "$OUT/fuzz_reader/gutenberg-bert"
prefixed 0c "$T/book.txt" "$OUT/fuzz_reader/gutenberg-gpt"
head -c 200 "$T/docs.jsonl" >"$OUT/fuzz_json/jsonl-line"

# ---- WikiExtractor output (fuzz_wikidoc; first byte: bit 0 GPT mode, bit 1
# passages off, bit 2 --format auto): the docs' sections as articles, in its
# <doc> form and its JSON form, headings and list lines included
"$PY" "$SRC/tests/fuzz/wikidoc_seeds.py" "$SRC/docs/data.md" "$OUT/fuzz_wikidoc"

# ---- tokenizer inputs: docs paragraphs and the GPT-2 whitespace cases
head -c 2000 "$SRC/docs/data.md" >"$OUT/fuzz_wordpiece/data-md"
head -c 2000 "$SRC/docs/tokenizers.md" >"$OUT/fuzz_bpe/tokenizers-md"
"$PY" - "$SRC/tests/golden/gpt2_whitespace.jsonl" "$OUT" <<'EOF'
import json, sys
cases = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
for i in range(0, len(cases), 8):  # eight cases per seed
    text = "".join(cases[i:i + 8]).encode()
    for h in ("fuzz_bpe", "fuzz_wordpiece"):
        open("%s/%s/whitespace-%02d" % (sys.argv[2], h, i // 8), "wb").write(text)
EOF
printf 'Odd \x93quote\x94 \xed\xa0\x80 \xc0\xaf\x00 end\r\n' >"$OUT/fuzz_bpe/invalid-utf8"
cp "$OUT/fuzz_bpe/invalid-utf8" "$OUT/fuzz_wordpiece/invalid-utf8"

# ---- configurations: conf/, and a config.cfg a run wrote, with --set lines
cp "$SRC/conf/bert-tiny.cfg" "$SRC/conf/gpt-mini.cfg" "$OUT/fuzz_config/"
{ cat "$SRC/conf/gpt1.cfg"; printf '\0model.hidden=96\ntrain.steps=10\noptim.lr=3e-4\noptim.warmup_steps=2'; } >"$OUT/fuzz_config/gpt1-with-set"

# ---- a tiny training run: its config.cfg and checkpoint, and its export
R=$T/run
"$BUILD/cloze-train" "$SRC/conf/bert-tiny.cfg" --set model.vocab_size=$(grep -c '' "$T/vocab.txt") \
    --set model.hidden=8 --set model.heads=2 --set model.layers=1 --set model.intermediate=16 \
    --set model.max_positions=16 --set data.seq=16 --set data.max_pred=3 \
    --set data.train_manifest="$T/wp/train.manifest" --set train.run_dir="$R" \
    --set train.steps=2 --set train.global_batch=2 --set train.micro_batch=2 --set train.threads=1 \
    --set train.ckpt_every=0 --set train.peak_gflops=10 --set optim.warmup_steps=1 --quiet >/dev/null 2>&1
cp "$R/config.cfg" "$OUT/fuzz_config/run-config.cfg"
ck=$(ls "$R"/ckpt-*.lz4 | tail -1)
prefixed 00 "$ck" "$OUT/fuzz_checkpoint/bert-tiny-file"
lz4 -dc "$ck" >"$T/container"
prefixed 01 "$T/container" "$OUT/fuzz_checkpoint/bert-tiny-container"
prefixed 03 "$T/container" "$OUT/fuzz_checkpoint/bert-tiny-container-sums-fixed"
"$BUILD/cloze-ckpt" export-hf "$ck" "$T/hf" >/dev/null 2>&1
cp "$T/hf/model.safetensors" "$OUT/fuzz_safetensors/bert-tiny"
for f in config.json tokenizer_config.json special_tokens_map.json; do
    cp "$T/hf/$f" "$OUT/fuzz_json/$f"
done
# ---- Hugging Face directories, valid and hostile (written with the
# standard library: tests/fuzz/hfdir_seeds.py)
"$PY" "$SRC/tests/fuzz/hfdir_seeds.py" "$OUT/fuzz_hfdir"
# ---- fine-tuning task files, written here (a few lines each, valid and
# not). First byte: the task of fuzz_task.c's table in the low nibble (0
# sst2, 1 mrpc, 2 rte, 3 cola, 4 tsv, 5 tsv 0,1,2 --no-header, 6 tsv q,a,y,
# 7 rte --label 3, 8 lines, 9 conll, a wnut17, b squad, c choice), bit 4
# collect (a training file).
TK=$OUT/fuzz_task
task() { # task BYTE NAME: the seed NAME is BYTE + stdin
    { printf "\\x$1"; cat; } >"$TK/$2"
}
printf 'sentence\tlabel\na gripping , funny film\t1\nflat and dull\t0\n' | task 00 sst2
printf 'sentence\tlabel\ntoo few fields\n' | task 00 sst2-short-line
printf 'sentence\tlabel\nfine\t2\n' | task 00 sst2-unknown-label
printf '\xef\xbb\xbfQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t11\t12\tThe cat sat .\tA cat sat .\r\n0\t13\t14\tIt rained .\tShe left early .\r\n' |
    task 01 mrpc-bom-crlf
printf 'index\tsentence1\tsentence2\tlabel\n0\tA dog runs .\tAn animal moves .\tentailment\n1\tIt is red .\tIt is blue .\tnot_entailment\n' |
    task 02 rte
printf 'index\tsentence\tlabel\n0\tno such columns\tentailment\n' | task 02 rte-missing-column
printf 'src1\t1\t\tThe book was read .\nsrc1\t0\t*\tBook the was read .\n\n' | task 03 cola
printf 'sentence\tlabel\ngood\tpos\nbad\tneg\nso so\tmixed\n' | task 14 tsv-collect
printf 'sentence\tlabel\nonly one class\tpos\n' | task 14 tsv-one-label
printf 'sentence\tlabel\nbad \xff byte\t1\n' | task 14 tsv-invalid-utf8
printf 'sentence\tlabel\nnul\0here\t1\n' | task 04 tsv-nul-byte
printf 'first\tsecond\t1\nthird\tfourth\t0\n' | task 15 tsv-index-no-header
printf 'id\ty\tq\ta\n1\tyes\tIs it ?\tIt is .\n2\tno\tWas it ?\tNo .\n' | task 16 tsv-named
printf 'index\tsentence1\tsentence2\tlabel\n0\tA .\tB .\tentailment\n1\tC .\tD .\tnot_entailment\n' |
    task 17 rte-label-index
printf 'one text\nanother text\n' | task 08 lines
printf '%s\n' '-DOCSTART- -X- O O' '' 'EU	B-ORG' 'rejects	O' 'German	B-MISC' '' 'Peter B-PER' \
    'Blackburn I-PER' '   ' | task 19 conll
printf 'Paris\tB-location\nis\tO\n \t\nnice\tO\r\n' | task 1a wnut17
printf 'word\nno tag\n' | task 19 conll-no-tag
printf 'w\tB-x\n' | task 09 conll-no-labels
"$PY" - "$TK" <<'EOF'
import json, sys
out = sys.argv[1]
def write(name, byte, text):
    open("%s/%s" % (out, name), "wb").write(bytes([byte]) + text.encode())
# SQuAD v1.1: answer_start counts characters (accents, a euro sign, U+202F)
ctx = "Caf\u00e9 au lait\u202fcosts 3 \u20ac in Li\u00e8ge."
def ans(text):
    return {"text": text, "answer_start": ctx.index(text)}
ok = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
    {"context": ctx, "qas": [
        {"id": "q1", "question": "How much?", "answers": [ans("3 \u20ac")]},
        {"id": "q2", "question": "Where?", "answers": [ans("Li\u00e8ge"), ans("in Li\u00e8ge")]}]},
    {"context": "  spaced \t out\n", "qas": [{"id": "q3", "question": "?", "answers": []}]}]}]}
bad = json.loads(json.dumps(ok))
bad["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 2
write("squad", 0x0b, json.dumps(ok, ensure_ascii=False))
write("squad-escaped", 0x0b, json.dumps(ok))
write("squad-bad-offset", 0x0b, json.dumps(bad))
write("squad-no-data", 0x0b, '{"version": "1.1"}')
frac = json.loads(json.dumps(ok))  # answer_start 9.5: not a character index
frac["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] += 0.5
write("squad-fractional-start", 0x0b, json.dumps(frac))
# multiple choice, JSON lines
one = {"context": "She opened the door.", "question": "Then?",
       "endings": ["She walked in.", "The door ate her."], "label": 0}
two = {"context": "It rained.", "endings": ["The ground got wet.", "The sun dried the sea."], "label": 1}
write("choice", 0x1c, json.dumps(one) + "\n\n" + json.dumps(two) + "\n")
write("choice-k-mismatch", 0x0c, json.dumps(one) + "\n" + json.dumps(dict(two, endings=["a", "b", "c"])) + "\n")
write("choice-bad-label", 0x0c, json.dumps(dict(two, label=2)) + "\n")
write("choice-not-json", 0x0c, '{"context": "x", "endings": ["a", "b"], "label": 0\n')
EOF

du -sh "$OUT"
for d in "$OUT"/*; do echo "$(basename "$d"): $(ls "$d" | wc -l) seeds, largest $(ls -S "$d" | sed -n 1p | xargs -I{} stat -c %s "$d/{}") bytes"; done
