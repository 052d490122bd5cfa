#!/usr/bin/env python3
"""Unlabelled in-domain text for task-adaptive pre-training (Gururangan et al.
2020, "Don't Stop Pretraining", Sec. 4): the sentences of a GLUE TSV's training
split after the first SKIP rows (the ones fine-tuning uses with --train-limit
SKIP), labels dropped, as a cloze-prep text corpus (one sentence a line, a blank
line after every PER_DOC sentences, so cloze-prep makes documents of them).

  tapt_corpus.py TRAIN.tsv DEV.tsv OUT.txt [--skip 2000] [--per-doc 16]

DEV.tsv is only read to check that none of its sentences is in the output
(the dev set must never be seen in pre-training); a match is an error.
"""
import argparse
import sys


def sentences(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    head = lines[0].split("\t")
    if "sentence" not in head:
        sys.exit(f"{path}: line 1: no 'sentence' column in the header")
    col = head.index("sentence")
    return [l.split("\t")[col].strip() for l in lines[1:] if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("dev")
    ap.add_argument("out")
    ap.add_argument("--skip", type=int, default=2000)
    ap.add_argument("--per-doc", type=int, default=16)
    a = ap.parse_args()
    rows = sentences(a.train)
    rest = rows[a.skip:]
    dev = set(sentences(a.dev))
    seen = [s for s in rest if s in dev]
    if seen:
        sys.exit(f"{a.out}: {len(seen)} dev sentence(s) among the training rows, e.g. {seen[0]!r}")
    with open(a.out, "w", encoding="utf-8") as f:
        for i in range(0, len(rest), a.per_doc):
            f.write("\n".join(rest[i:i + a.per_doc]) + "\n\n")
    words = sum(len(s.split()) for s in rest)
    print(f"{a.out}: training rows {a.skip + 1}-{len(rows)} of {len(rows)}: {len(rest)} sentences, "
          f"{words} words, {(len(rest) + a.per_doc - 1) // a.per_doc} documents; "
          f"none of the {len(dev)} dev sentences among them")


if __name__ == "__main__":
    main()
