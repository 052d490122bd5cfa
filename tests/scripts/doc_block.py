#!/usr/bin/env python3
"""The first shell block of a doc's first section, with the reader's values
replaced, for a test that runs it as written.

    doc_block.py DOC NAME=VALUE...

Prints the first ```sh block under DOC's first "## " heading. Its lines
that only assign variables (`RANKS=4 NET=10.1.0.0/16   # ...`) are the
reader's own values: each NAME given here replaces that variable's value.
Every NAME given must be assigned in the block and every variable the block
assigns on such a line must be given, so that a change to the doc's block
fails the test (one line naming the doc and what differs) instead of
running something else.
"""
import re
import shlex
import sys

ASSIGNS = re.compile(r"^\s*((?:[A-Za-z_][A-Za-z0-9_]*=\S+\s*)+)(#.*)?$")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    doc, given = argv[1], {}
    for a in argv[2:]:
        k, _, v = a.partition("=")
        given[k] = v
    text = open(doc, encoding="utf-8").read()
    sec = re.search(r"^## [^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    block = re.search(r"^```sh\n(.*?)^```", sec.group(1) if sec else "", re.M | re.S)
    if not block:
        print(f"{doc}: no ```sh block in the first '## ' section", file=sys.stderr)
        return 1
    out, seen = [], set()
    for line in block.group(1).split("\n"):
        m = ASSIGNS.match(line)
        if m:
            words = []
            for w in m.group(1).split():
                k = w.split("=", 1)[0]
                if k not in given:
                    print(f"{doc}: the block sets {k}, which the test does not know: update the test",
                          file=sys.stderr)
                    return 1
                seen.add(k)
                words.append(f"{k}={shlex.quote(given[k])}")
            line = " ".join(words)
        out.append(line)
    for k in sorted(set(given) - seen):
        print(f"{doc}: the block no longer sets {k}: update the test", file=sys.stderr)
        return 1
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
