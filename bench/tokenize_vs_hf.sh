#!/usr/bin/env bash
# Side-by-side single-core tokenizer throughput: cloze (bench-tokenize_bench)
# vs Hugging Face on the same lines of shared/data text, in one run.
#   HF fast: BertTokenizerFast / GPT2TokenizerFast (Rust), encode_batch on
#            1,000-line batches, TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1.
#   HF slow: the pure-Python BertTokenizer / GPT2Tokenizer (transformers < 5),
#            on the first 20,000 lines only (they are slow), for reference.
# Usage: bench/tokenize_vs_hf.sh BUILD_DIR [SHARED_DATA] [PYTHON]
#   PYTHON needs transformers 4.x, e.g. a venv with transformers==4.57.1.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [SHARED_DATA] [PYTHON]}
data=${2:-${CLOZE_SHARED_DATA:-$(dirname "$0")/../../shared/data}}
py=${3:-python3}
export TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 OMP_NUM_THREADS=1

ours=$("$build/bench/bench-tokenize_bench" "$data" 3)
echo "$ours"
"$py" - "$data" "$ours" <<'PY'
import os, re, sys, time
from transformers import BertTokenizer, BertTokenizerFast, GPT2Tokenizer, GPT2TokenizerFast

data, ours = sys.argv[1], sys.argv[2]
files = ["corpus/wikitext-2-raw/wiki.valid.raw"] + ["corpus/gutenberg/pg%s.txt" % b for b in
         ["11", "1342", "16", "1661", "174", "236", "2701", "345", "4300", "5200", "76", "98"]]
lines = []
for f in files:  # same units as bench-tokenize_bench: line, "\r" dropped, "\n" kept
    raw = open(os.path.join(data, f), "rb").read().split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines += [(l[:-1] if l.endswith(b"\r") else l).decode() + "\n" for l in raw]
mb = sum(len(l.encode()) for l in lines) / 1e6
sub = lines[:20000]
sub_mb = sum(len(l.encode()) for l in sub) / 1e6

def fast_rate(tok):
    best, n = 1e30, 0
    for _ in range(3):
        t0 = time.perf_counter()
        n = 0
        for i in range(0, len(lines), 1000):
            for e in tok.backend_tokenizer.encode_batch(lines[i:i + 1000], add_special_tokens=False):
                n += len(e.ids)
        best = min(best, time.perf_counter() - t0)
    return mb / best, n

def slow_rate(tok):
    t0 = time.perf_counter()
    n = sum(len(tok.convert_tokens_to_ids(tok.tokenize(l))) for l in sub)
    return sub_mb / (time.perf_counter() - t0), n

vocab = os.path.join(data, "vocab/bert-base-uncased/vocab.txt")
enc, mer = os.path.join(data, "vocab/gpt2/encoder.json"), os.path.join(data, "vocab/gpt2/vocab.bpe")
res = {}
res["wordpiece"] = fast_rate(BertTokenizerFast(vocab, do_lower_case=True))
res["gpt2-bpe"] = fast_rate(GPT2TokenizerFast(enc, mer))
slow = {"wordpiece": slow_rate(BertTokenizer(vocab, do_lower_case=True)),
        "gpt2-bpe": slow_rate(GPT2Tokenizer(enc, mer))}
for name in ["wordpiece", "gpt2-bpe"]:
    m = re.search(r"cloze %s\s*:\s*([\d.]+) MB/s\s+(\d+) tokens" % re.escape(name), ours)
    c_rate, c_tok = float(m.group(1)), int(m.group(2))
    f_rate, f_tok = res[name]
    print("HF fast %-9s: %8.2f MB/s  %d tokens%s" % (name, f_rate, f_tok,
          "" if f_tok == c_tok else "  (TOKEN COUNT DIFFERS from cloze)"))
    print("HF slow %-9s: %8.2f MB/s  (first %d lines, %.2f MB)" % (name, slow[name][0], len(sub), sub_mb))
    print("ratio cloze / HF fast %-9s: %.2fx   cloze / HF slow: %.1fx" % (name, c_rate / f_rate, c_rate / slow[name][0]))
PY
