#!/usr/bin/env python3
"""cloze-prep's GPT-mode documents (docs/formats.md, "GPT mode"), written from
the rules, not from the C code: the reference that make_goldens.py and
corpus_prep_data.sh compare cloze-prep against.

    gpt_documents.py FILE FORMAT K OUT   writes document K's bytes to OUT
"""
import sys


def is_blank(line):
    return all(c in b" \t\f\r" for c in line)


def wikitext_title(line):
    line = line.rstrip(b"\r")
    return (len(line) >= 5 and line.startswith(b" = ") and line.endswith(b" = ")
            and line[3:4] != b"=")


def join_doc(lines):
    """A document's bytes: its lines, blank lines at both edges dropped, each
    line's terminator kept but the last one's."""
    while lines and is_blank(lines[0]):
        lines = lines[1:]
    while lines and is_blank(lines[-1]):
        lines = lines[:-1]
    return b"\n".join(lines).rstrip(b"\r") if lines else None


def gpt_documents(data, fmt):
    """cloze-prep's GPT-mode documents of a file (docs/formats.md), written
    from the rules, not from the C code."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    docs, cur = [], []
    if fmt == "wikitext":
        for line in lines:
            if wikitext_title(line) and any(not is_blank(x) for x in cur):
                docs.append(join_doc(cur))
                cur = []
            cur.append(line)
        docs.append(join_doc(cur))
    elif fmt == "gutenberg":
        def marker(line, what):
            i = line.find(b"***")
            return i >= 0 and what in line[i:]
        # the book between the markers; a file without them is all book
        start = next((i for i, x in enumerate(lines) if marker(x, b"START OF")), -1)
        end = next((i for i, x in enumerate(lines) if i > start and marker(x, b"END OF")),
                   len(lines))
        docs.append(join_doc(lines[start + 1:end]))
    return [d for d in docs if d]


if __name__ == "__main__":
    path, fmt, k, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open(path, "rb") as f:
        docs = gpt_documents(f.read(), fmt)
    with open(out, "wb") as f:
        f.write(docs[k])
