#!/usr/bin/env python3
"""Compares two cloze-sweep results.csv files cell by cell.

usage: compare_results.py A.csv B.csv [--ignore col,col,...] [--rows N]

Every column but the ignored ones (the timing columns: wall_s, train_s,
tokens_per_s, mfu) must hold the same text in both files, row for row, and
both files must have the same header. --rows N: both must have N rows.
Exits 1 and prints the differences otherwise."""
import csv
import sys


def main(argv):
    a_path, b_path = argv[1], argv[2]
    ignore, rows = set(), None
    i = 3
    while i < len(argv):
        if argv[i] == "--ignore":
            ignore = set(argv[i + 1].split(","))
            i += 2
        elif argv[i] == "--rows":
            rows = int(argv[i + 1])
            i += 2
        else:
            sys.exit(f"compare_results.py: unknown argument {argv[i]}")
    with open(a_path, newline="") as f:
        a = list(csv.reader(f))
    with open(b_path, newline="") as f:
        b = list(csv.reader(f))
    if a[0] != b[0]:
        print(f"FAIL: headers differ:\n  {a[0]}\n  {b[0]}")
        return 1
    head = a[0]
    missing = ignore - set(head)
    if missing:
        print(f"FAIL: no column(s) {sorted(missing)} to ignore")
        return 1
    if rows is not None and (len(a) - 1 != rows or len(b) - 1 != rows):
        print(f"FAIL: expected {rows} rows, got {len(a) - 1} and {len(b) - 1}")
        return 1
    if len(a) != len(b):
        print(f"FAIL: {len(a) - 1} rows against {len(b) - 1}")
        return 1
    bad = 0
    compared = 0
    for r, (ra, rb) in enumerate(zip(a[1:], b[1:]), start=1):
        for k, name in enumerate(head):
            if name in ignore:
                continue
            compared += 1
            if ra[k] != rb[k]:
                bad += 1
                if bad <= 10:
                    print(f"FAIL: row {r} ({ra[1]}) column {name}: {ra[k]!r} != {rb[k]!r}")
    if bad:
        return 1
    print(f"results identical: {len(a) - 1} rows, {compared} cells compared "
          f"(ignored: {', '.join(sorted(ignore))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
