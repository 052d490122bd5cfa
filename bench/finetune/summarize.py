#!/usr/bin/env python3
"""Mean ± sample std over restarts of fine-tuning dev scores, as markdown.

  summarize.py NAME=GLOB [NAME=GLOB ...]

Each GLOB matches cloze-finetune results.jsonl files (the final line of
each is one restart) or JSON-lines files of bench/finetune/hf_glue.py (one
line per restart; a NAME ending in @TASK keeps that task's lines only).
Prints one row per NAME: the figures of docs/finetune.md's tables.
"""
import glob
import json
import statistics
import sys


def finals(pattern, task=None):
    out = []
    for path in sorted(glob.glob(pattern)):
        for line in open(path):
            r = json.loads(line)
            if r.get("framework") == "transformers":
                if task is None or r["task"] == task:
                    d = r["dev"]
                    out.append({"seed": r["seed"], "accuracy": 100 * d["accuracy"],
                                "f1": 100 * d["f1"], "mcc": 100 * d["mcc"],
                                "steps": r["steps"], "seconds": r["seconds"]})
            elif r.get("kind") == "eval" and r.get("final"):
                out.append(dict(r["dev"], seed=r["seed"], steps=r["steps"], seconds=r["seconds"]))
    return out


def fmt(xs):
    if not xs:
        return "—"
    if len(xs) == 1:
        return f"{xs[0]:.2f} (1 run)"
    return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}"


print("| run | restarts | " + " | ".join(["figure 1", "figure 2"]) + " | per seed |")
for arg in sys.argv[1:]:
    name, pattern = arg.split("=", 1)
    task = name.split("@")[1] if "@" in name else None
    rs = finals(pattern, task)
    if not rs:
        print(f"| {name} | 0 | — | — | |")
        continue
    keys = [k for k in ("accuracy", "f1", "exact", "precision") if k in rs[0]]
    if "exact" in rs[0]:
        keys = ["exact", "f1"]
    elif "precision" in rs[0]:
        keys = ["f1", "precision"]
    else:
        keys = ["accuracy", "f1"]
    cells = [f"{k} {fmt([r[k] for r in rs])}" for k in keys]
    seeds = ", ".join(f"s{r['seed']}: {r[keys[0]]:.2f}" for r in rs)
    print(f"| {name} | {len(rs)} | " + " | ".join(cells) + f" | {seeds} |")
