#!/usr/bin/env python3
"""The numbers of a metrics.jsonl that must not depend on the allocation.

usage: metrics_numbers.py METRICS.jsonl

Prints each record as one line of sorted JSON, less the fields that are
timings, rates, memory or the cost model's predictions (seconds, per_s,
mfu, rss, pred_) and less the records made only of those and the resume
record. The exact-sum tests (dist.exact) diff two runs' lines: equal text
is equal bits for the figures metrics.jsonl keeps as floats (%.9g)."""
import json
import re
import sys

SKIP = re.compile(r"seconds|per_s|mfu|rss|pred_")


def records(path):
    with open(path) as f:
        for line in f:
            r = {k: v for k, v in json.loads(line).items() if not SKIP.search(k)}
            if r and "resumed" not in r:
                yield r


if __name__ == "__main__":
    for r in records(sys.argv[1]):
        print(json.dumps(r, sort_keys=True))
