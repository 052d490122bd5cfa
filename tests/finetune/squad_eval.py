#!/usr/bin/env python3
"""SQuAD v1.1 exact match and F1 of a predictions file by the rules of the
official evaluate-v1.1.py (written here from its published definition:
normalize_answer = lower, remove punctuation, remove the articles a/an/the,
fix whitespace; F1 over bags of normalised tokens; max over the ground
truths; means in percent), compared with cloze-finetune's final results line.

  squad_eval.py DATASET.json PREDICTIONS.json RESULTS.jsonl [dev|test|input]

RESULTS: a run's results.jsonl (dev: its final evaluation; test: its "test"
line) or predict's scores.json (input).
"""
import collections
import json
import re
import string
import sys


def normalize_answer(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1_score(pred, truth):
    p, t = normalize_answer(pred).split(), normalize_answer(truth).split()
    common = collections.Counter(p) & collections.Counter(t)
    same = sum(common.values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p), same / len(t)
    return 2 * prec * rec / (prec + rec)


data = json.load(open(sys.argv[1]))["data"]
preds = json.load(open(sys.argv[2]))
res = [json.loads(l) for l in open(sys.argv[3])]
split = sys.argv[4] if len(sys.argv) > 4 else "dev"
if split == "dev":
    final = [r for r in res if r.get("final")][-1]
else:
    final = [r for r in res if r.get("kind") == split][-1]
    final = dict(final, dev=final[split])
em = f1 = n = 0
for art in data:
    for p in art["paragraphs"]:
        for qa in p["qas"]:
            truths = [a["text"] for a in qa["answers"]]
            pred = preds[qa["id"]]
            em += max(float(normalize_answer(pred) == normalize_answer(t)) for t in truths)
            f1 += max(f1_score(pred, t) for t in truths)
            n += 1
em, f1 = 100 * em / n, 100 * f1 / n
ok = abs(em - final["dev"]["exact"]) < 1e-4 and abs(f1 - final["dev"]["f1"]) < 1e-4 and len(preds) == n
print(f"SQuAD: official rules EM {em:.3f} F1 {f1:.3f}; cloze EM {final['dev']['exact']:.3f} "
      f"F1 {final['dev']['f1']:.3f} over {n} questions" + ("" if ok else "  MISMATCH"))
sys.exit(0 if ok else 1)
