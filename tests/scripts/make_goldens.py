#!/usr/bin/env python3
"""Reference token ids for tests/test_tokenizers.c, made by Hugging Face
transformers on real text from ../shared/data. Only the ids are stored
(tests/golden/*.txt.gz); the test re-reads the same lines from shared/data.

How they were made (transformers 4.57.1, the last release with the pure-Python
"slow" tokenizers; tokenizers 0.22):
    python3 -m venv /tmp/hf457 && /tmp/hf457/bin/pip install transformers==4.57.1
    cmake --build build-tok --target test_tokenizers
    CLOZE_SHARED_DATA=../shared/data build-tok/tests/test_tokenizers \\
        --write-cased-vocab tests/golden/cased_vocab.txt   # our learner, cased
    CLOZE_SHARED_DATA=../shared/data build-tok/tests/test_tokenizers \
        --write-learned-bpe tests/golden/learned_bpe.json tests/golden/learned_bpe.bpe
    /tmp/hf457/bin/python tests/scripts/make_goldens.py ../shared/data tests/golden

Text units: line k (1-based) of a file, with its "\\r" dropped, plus "\\n".
Lines: WikiText-2 valid, odd line numbers; four Gutenberg books, every 7th line
(the learned-BPE golden: WikiText-2 valid lines 1, 5, 9, ... only).
Ids come from the slow Python tokenizers (BertTokenizer, GPT2Tokenizer); the
script also runs the fast (Rust) ones and prints how many lines differ.

File format (gzip text): "S <path relative to shared/data>" starts a source,
then "<line number> <id> <id> ..." per unit (no [CLS]/[SEP]).
"""
import gzip
import os
import sys

from transformers import BertTokenizer, BertTokenizerFast, GPT2Tokenizer, GPT2TokenizerFast

SOURCES = [
    ("corpus/wikitext-2-raw/wiki.valid.raw", 2, 1),  # (path, step, first line)
    ("corpus/gutenberg/pg4300.txt", 7, 1),
    ("corpus/gutenberg/pg1661.txt", 7, 1),
    ("corpus/gutenberg/pg98.txt", 7, 1),
    ("corpus/gutenberg/pg345.txt", 7, 1),
]


def units(data, sources):
    for rel, step, first in sources:
        with open(os.path.join(data, rel), "rb") as f:
            lines = f.read().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        sel = []
        for k in range(first, len(lines) + 1, step):
            line = lines[k - 1]
            if line.endswith(b"\r"):
                line = line[:-1]
            sel.append((k, (line + b"\n").decode("utf-8")))
        yield rel, sel


def write(path, data, encode_slow, encode_fast, sources=SOURCES):
    out, differ, total = [], 0, 0
    for rel, sel in units(data, sources):
        out.append("S " + rel)
        for k, text in sel:
            ids = encode_slow(text)
            if encode_fast(text) != ids:
                differ += 1
            total += 1
            out.append(" ".join([str(k)] + [str(i) for i in ids]))
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
        f.write(("\n".join(out) + "\n").encode())
    print(f"{path}: {total} lines, fast tokenizer differs on {differ}, "
          f"{os.path.getsize(path)} bytes")


def main():
    data, golden = sys.argv[1], sys.argv[2]
    vocab = os.path.join(data, "vocab/bert-base-uncased/vocab.txt")
    slow = BertTokenizer(vocab, do_lower_case=True)
    fast = BertTokenizerFast(vocab, do_lower_case=True)
    write(os.path.join(golden, "wordpiece_uncased.txt.gz"), data,
          lambda t: slow.convert_tokens_to_ids(slow.tokenize(t)),
          lambda t: fast.encode(t, add_special_tokens=False))

    cased = os.path.join(golden, "cased_vocab.txt")
    slow = BertTokenizer(cased, do_lower_case=False)
    fast = BertTokenizerFast(cased, do_lower_case=False)
    write(os.path.join(golden, "wordpiece_cased.txt.gz"), data,
          lambda t: slow.convert_tokens_to_ids(slow.tokenize(t)),
          lambda t: fast.encode(t, add_special_tokens=False))

    enc_json = os.path.join(data, "vocab/gpt2/encoder.json")
    merges = os.path.join(data, "vocab/gpt2/vocab.bpe")
    slow = GPT2Tokenizer(enc_json, merges)
    fast = GPT2TokenizerFast(enc_json, merges)
    write(os.path.join(golden, "gpt2.txt.gz"), data,
          lambda t: slow.convert_tokens_to_ids(slow.tokenize(t)),
          lambda t: fast.encode(t))

    enc_json = os.path.join(golden, "learned_bpe.json")
    merges = os.path.join(golden, "learned_bpe.bpe")
    slow = GPT2Tokenizer(enc_json, merges)
    fast = GPT2TokenizerFast(enc_json, merges)
    write(os.path.join(golden, "learned_bpe.txt.gz"), data,
          lambda t: slow.convert_tokens_to_ids(slow.tokenize(t)),
          lambda t: fast.encode(t), [("corpus/wikitext-2-raw/wiki.valid.raw", 4, 1)])


if __name__ == "__main__":
    main()
