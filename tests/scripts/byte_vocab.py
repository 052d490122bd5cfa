#!/usr/bin/env python3
"""A byte-level BPE vocabulary with no merges, for cloze-prep tests: the 256
byte tokens of GPT-2's bytes_to_unicode table (ids in GPT-2's order: '!' is
0, ' ' is 220) and <|endoftext|> = 256; DIR/encoder.json and DIR/vocab.bpe.
One token per byte, so expected outputs can be written by hand."""
import json
import sys

d = sys.argv[1]
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
enc = {chr(c): i for i, c in enumerate(cs)}
enc["<|endoftext|>"] = 256
json.dump(enc, open(d + "/encoder.json", "w"), ensure_ascii=False)
open(d + "/vocab.bpe", "w").write("#version: 0.2\n")
