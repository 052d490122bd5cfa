#!/usr/bin/env python3
"""Compares the per-step training losses of two metrics.jsonl files.

usage: compare_metrics.py A.jsonl B.jsonl [--rel TOL | --exact] [--fields loss,...]
                          [--from STEP] [--to STEP]

For each step present in both files (the LAST record of a step wins, so a
resumed run that repeated steps is judged by its final word), every field
must agree: --exact compares the printed digits, --rel the relative
difference. Exits 1 and prints the first disagreements otherwise."""
import json
import sys


def load(path, fields):
    steps = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" not in rec:
                continue  # evaluation records
            steps[rec["step"]] = {k: rec[k] for k in fields}
    return steps


def main(argv):
    args = argv[1:]
    a_path, b_path = args[0], args[1]
    rel, exact, fields, lo, hi = 1e-5, False, ["loss"], 1, 1 << 62
    i = 2
    while i < len(args):
        if args[i] == "--rel":
            rel = float(args[i + 1]); i += 2
        elif args[i] == "--exact":
            exact = True; i += 1
        elif args[i] == "--fields":
            fields = args[i + 1].split(","); i += 2
        elif args[i] == "--from":
            lo = int(args[i + 1]); i += 2
        elif args[i] == "--to":
            hi = int(args[i + 1]); i += 2
        else:
            sys.exit("compare_metrics: unknown argument " + args[i])
    a, b = load(a_path, fields), load(b_path, fields)
    common = sorted(s for s in a if s in b and lo <= s <= hi)
    expected = [s for s in a if lo <= s <= hi]
    if not common or len(common) != len(expected):
        print(f"compare_metrics: steps differ: {a_path} has {sorted(expected)}, "
              f"{b_path} has {sorted(s for s in b if lo <= s <= hi)}")
        return 1
    bad = 0
    for s in common:
        for k in fields:
            x, y = a[s][k], b[s][k]
            if exact:
                ok = repr(x) == repr(y)
            else:
                ok = abs(x - y) <= rel * max(abs(x), abs(y), 1e-30)
            if not ok:
                bad += 1
                if bad <= 5:
                    print(f"step {s} {k}: {x!r} vs {y!r}")
    worst = max(abs(a[s][k] - b[s][k]) / max(abs(a[s][k]), 1e-30) for s in common for k in fields)
    print(f"compare_metrics: {len(common)} steps, max relative difference {worst:.3g}"
          f"{' (exact required)' if exact else f' (tolerance {rel:g})'}: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
