#!/usr/bin/env python3
"""Small fine-tuning tasks made from a text corpus, for tests/scripts/test_finetune.sh.

  make_tasks.py CORPUS OUTDIR

Deterministic (a fixed seed). Writes:
  cls_train.tsv / cls_dev.tsv   sentence<TAB>label, label 1 when the sentence
                                has the word "the" (200 / 100 rows, header)
  squad_train.json / squad_dev.json   SQuAD v1.1: contexts of three sentences;
                                "what follows X Y ?" answered by the word after
                                the bigram X Y (120 / 40 questions)
  tag_train.conll / tag_dev.conll   token<TAB>tag: an article and the word
                                after it B-det I-det, numbers B-num, the rest O
                                (150 / 60 sentences; some breaks are a line
                                holding a tab, as WNUT-17's)
  lines.txt                     10 sentences, one per line
  pair_train.tsv / pair_dev.tsv sentence1<TAB>sentence2<TAB>label, label 1 when
                                both sentences have "the" (a symmetric relation,
                                for GPT-1's similarity input; 200 / 60 rows)
  choice_train.jsonl / choice_dev.jsonl   multiple choice: the first half of a
                                sentence as context, its own second half and two
                                other sentences' second halves as the 3 endings,
                                the label where its own went (120 / 40 lines)
  pair_dev_swapped.tsv, choice_dev_reversed.jsonl   the dev files with the two
                                sentences swapped / the endings in reverse order
"""
import json
import os
import random
import re
import sys

corpus, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
rng = random.Random(12345)
sents = []
for line in open(corpus, encoding="utf-8"):
    for s in re.split(r"(?<=[.!?])\s+", line.strip()):
        words = s.split()
        if 4 <= len(words) <= 30 and "\t" not in s and all(w.isascii() for w in words):
            sents.append(" ".join(words))
rng.shuffle(sents)
assert len(sents) > 800, len(sents)

THE = re.compile(r"(?i)\bthe\b")


def cls_rows(part):
    return "sentence\tlabel\n" + "".join(f"{s}\t{int(bool(THE.search(s)))}\n" for s in part)

open(f"{out}/cls_train.tsv", "w").write(cls_rows(sents[:200]))
open(f"{out}/cls_dev.tsv", "w").write(cls_rows(sents[200:300]))

def squad(part, n):
    data, k = [], 0
    for i in range(0, len(part) - 3, 3):
        ctx = " ".join(part[i:i + 3])
        words = ctx.split()
        if len(words) < 14:
            continue
        j = rng.randrange(2, len(words) - 1)
        x, y, ans = words[j - 2], words[j - 1], words[j]
        start = len(" ".join(words[:j])) + 1
        assert ctx[start:start + len(ans)] == ans
        data.append({"title": f"t{k}", "paragraphs": [{"context": ctx, "qas": [{
            "id": f"q{k}", "question": f"what follows {x} {y} ?",
            "answers": [{"text": ans, "answer_start": start}]}]}]})
        k += 1
        if k == n:
            break
    return {"version": "1.1", "data": data}

json.dump(squad(sents[300:800], 120), open(f"{out}/squad_train.json", "w"))
json.dump(squad(sents[800:], 40), open(f"{out}/squad_dev.json", "w"))

def tags(part, breaks):
    """An article and the word after it are a "det" chunk (B-det I-det),
    a number is B-num, the rest O: visible to an uncased vocabulary."""
    lines = []
    for n, s in enumerate(part):
        words = s.split()
        t = ["O"] * len(words)
        for i, w in enumerate(words):
            if re.fullmatch(r"\d+", w):
                t[i] = "B-num"
            elif w.lower() in ("the", "a", "an") and i + 1 < len(words) and t[i] == "O":
                t[i], t[i + 1] = "B-det", "I-det"
        lines += [f"{w}\t{x}" for w, x in zip(words, t)]
        lines.append("\t" if n % breaks == 0 else "")
    return "\n".join(lines) + "\n"


open(f"{out}/tag_train.conll", "w").write(tags(sents[300:450], 3))
open(f"{out}/tag_dev.conll", "w").write(tags(sents[450:510], 4))
open(f"{out}/lines.txt", "w").write("\n".join(sents[510:520]) + "\n")


def pair_rows(part):
    rows = ["sentence1\tsentence2\tlabel"]
    for i in range(0, len(part) - 1, 2):
        a, b = part[i], part[i + 1]
        rows.append(f"{a}\t{b}\t{int(bool(THE.search(a) and THE.search(b)))}")
    return "\n".join(rows) + "\n"


open(f"{out}/pair_train.tsv", "w").write(pair_rows(sents[520:920]))
open(f"{out}/pair_dev.tsv", "w").write(pair_rows(sents[920:1040]))
hdr, *rows = [l.split("\t") for l in pair_rows(sents[920:1040]).splitlines()]
open(f"{out}/pair_dev_swapped.tsv", "w").write(
    "\t".join(hdr) + "\n" + "".join(f"{b}\t{a}\t{y}\n" for a, b, y in rows))


def choice_lines(part, n):
    halves = []
    for s in part:
        w = s.split()
        halves.append((" ".join(w[: len(w) // 2]), " ".join(w[len(w) // 2:])))
    out_lines = []
    for i in range(n):
        ctx, own = halves[i]
        others = [halves[(i + 7) % len(halves)][1], halves[(i + 13) % len(halves)][1]]
        k = rng.randrange(3)
        endings = others[:k] + [own] + others[k:]
        out_lines.append(json.dumps({"context": ctx, "endings": endings, "label": k}))
    return "\n".join(out_lines) + "\n"


open(f"{out}/choice_train.jsonl", "w").write(choice_lines(sents[:300], 120))
open(f"{out}/choice_dev.jsonl", "w").write(choice_lines(sents[300:500], 40))
with open(f"{out}/choice_dev_reversed.jsonl", "w") as f:
    for line in open(f"{out}/choice_dev.jsonl"):
        x = json.loads(line)
        x["label"] = len(x["endings"]) - 1 - x["label"]
        x["endings"] = x["endings"][::-1]
        f.write(json.dumps(x) + "\n")
