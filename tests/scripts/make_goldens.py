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

GPT mode is byte-exact (docs/formats.md, "GPT mode"), and two goldens check
it against HF GPT2Tokenizer:
  - gpt2_whitespace.jsonl: WHITESPACE_CASES below (leading, trailing and
    repeated spaces, tabs, newlines, CRLF, Unicode spaces), one JSON object
    {"text": ..., "ids": [...]} per line;
  - gpt2_documents.txt.gz: whole documents as cloze-prep's GPT mode cuts them
    (the first articles of WikiText-2 valid, a Gutenberg book's body), cut
    by an independent implementation of the rules (gpt_documents.py):
    "S <path> <format>" then "D <document index> <id> ...".
`make_goldens.py DATA GOLDEN gpt2` writes only these two.
"""
import gzip
import json
import os
import sys

from transformers import BertTokenizer, BertTokenizerFast, GPT2Tokenizer, GPT2TokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_documents import gpt_documents  # noqa: E402

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


# GPT-2 inputs where whitespace is text: what cloze-prep's GPT mode feeds the
# encoder (no normalisation). "<|endoftext|>" is left out: HF splits it out as
# a special token, encoder.py (and cloze) encode it as text.
WHITESPACE_CASES = [
    " = Robert Boulter = ", " = Robert Boulter = \n", " = = Career = = \n", " \n",
    " The 1 @,@ 000 @-@ year @.@ old . \n",
    "", " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", " \n", "\n ", " \n \n ",
    "\r\n", "\r\n\r\n", "\r", "\x0b\x0c", "\u0085", "\u00a0", "\u3000", "\u2028\u2029",
    "  two leading spaces", "   three leading", "\tleading tab", "\t\tleading tabs",
    " \t mixed lead", "\n\nleading newlines", "\r\nleading CRLF",
    "trailing space ", "trailing spaces   ", "trailing tab\t", "trailing newline\n",
    "trailing newlines\n\n\n", "trailing mix \t\n ", "trailing CRLF\r\n",
    "double  space", "triple   space", "many" + " " * 20 + "spaces", "tab\tinside",
    "tabs\t\t\tinside", "space tab \t space", "a \n b", "a  \n  b", "a\t\nb",
    "line one\nline two\n\nparagraph two\n", "a\r\nb", "a\r\n\r\nb", "a\rb",
    "  indented\n    more indented\n\tTabbed\n",
    "def f(x):\n    return x  # comment\n\n\nprint(f(1))\n",
    "It's  'quoted'  text's\n", "they 're  here 've\n", "  123  456\n", "1,000  2.5\t3",
    "Hello\u00a0world", "x\u3000y", "a\u2028b", "zero\u200bwidth", "nbsp \u00a0 run",
    "  h\u00e9llo  w\u00f6rld  ", "\u4e2d\u6587  \u5b57\n", "\U0001F600  \U0001F600\n",
    "\n = Valkyria Chronicles III = \n \n Senj\u014d no Valkyria 3 : Unrecorded Chronicles\n",
]


def gpt2_whitespace(path, encode_slow, encode_fast):
    differ = 0
    with open(path, "w", encoding="utf-8") as f:
        for text in WHITESPACE_CASES:
            ids = encode_slow(text)
            differ += encode_fast(text) != ids
            f.write(json.dumps({"text": text, "ids": ids}) + "\n")
    print(f"{path}: {len(WHITESPACE_CASES)} cases, fast tokenizer differs on {differ}")


GPT_DOCUMENT_SOURCES = [("corpus/wikitext-2-raw/wiki.valid.raw", "wikitext", 4),
                        ("corpus/gutenberg/pg11.txt", "gutenberg", 1)]


def gpt2_documents(path, data, encode_slow, encode_fast):
    out, differ, total = [], 0, 0
    for rel, fmt, first in GPT_DOCUMENT_SOURCES:
        with open(os.path.join(data, rel), "rb") as f:
            docs = gpt_documents(f.read(), fmt)
        out.append("S %s %s" % (rel, fmt))
        for k, doc in enumerate(docs[:first]):
            text = doc.decode("utf-8")
            ids = encode_slow(text)
            differ += encode_fast(text) != ids
            total += 1
            out.append(" ".join(["D", str(k)] + [str(i) for i in ids]))
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
        f.write(("\n".join(out) + "\n").encode())
    print(f"{path}: {total} documents, fast tokenizer differs on {differ}, "
          f"{os.path.getsize(path)} bytes")


def main():
    data, golden = sys.argv[1], sys.argv[2]
    only_gpt2 = sys.argv[3:] == ["gpt2"]
    enc_json = os.path.join(data, "vocab/gpt2/encoder.json")
    merges = os.path.join(data, "vocab/gpt2/vocab.bpe")
    slow = GPT2Tokenizer(enc_json, merges)
    fast = GPT2TokenizerFast(enc_json, merges)
    gpt2_whitespace(os.path.join(golden, "gpt2_whitespace.jsonl"),
                    lambda t: slow.convert_tokens_to_ids(slow.tokenize(t)),
                    lambda t: fast.encode(t))
    gpt2_documents(os.path.join(golden, "gpt2_documents.txt.gz"), data,
                   lambda t: slow.convert_tokens_to_ids(slow.tokenize(t)),
                   lambda t: fast.encode(t))
    if only_gpt2:
        return

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
