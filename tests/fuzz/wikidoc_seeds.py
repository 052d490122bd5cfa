#!/usr/bin/env python3
"""Seeds of fuzz_wikidoc (called by make_seeds.sh): a Markdown page's
sections as WikiExtractor articles, in its <doc> form and its JSON form,
with the heading lines ("Title.") and list lines it leaves in its output.
First byte of a seed: bit 0 GPT mode, bit 1 passages off, bit 2 --format
auto (else wikiextractor).

    wikidoc_seeds.py PAGE.md OUT_DIR
"""
import json
import sys

page, out = sys.argv[1], sys.argv[2]
articles, cur = [], None
for line in open(page, encoding="utf-8"):
    line = line.rstrip("\n")
    if line.startswith("# ") or line.startswith("## "):
        cur = {"title": line.lstrip("# "), "lines": []}
        articles.append(cur)
    elif line.startswith("### ") and cur:
        cur["lines"].append(line.lstrip("# ").rstrip(".") + ".")  # a heading, as WikiExtractor writes it
    elif line.strip() and cur and not line.startswith("```"):
        cur["lines"].append(line.lstrip("* ") if line.startswith("* ") else line)
articles = [a for a in articles if a["lines"]][:6]
doc, js = [], []
for i, a in enumerate(articles):
    url = "https://en.wikipedia.org/wiki?curid=%d" % (i + 10)
    doc.append('<doc id="%d" url="%s" title="%s">\n%s\n\n%s\n</doc>\n'
               % (i + 10, url, a["title"], a["title"], "\n".join(a["lines"][:12])))
    js.append(json.dumps({"id": str(i + 10), "revid": str(i), "url": url, "title": a["title"],
                          "text": "\n".join(a["lines"][:12])}) + "\n")
doc, js = "".join(doc)[:6000], "".join(js)[:6000]
doc = doc[:doc.rfind("</doc>\n") + 7]
js = js[:js.rfind("\n") + 1]
for name, byte, text in [("doc-bert", 0, doc), ("doc-gpt", 1, doc), ("doc-all-lines", 2, doc),
                         ("doc-auto", 4, doc), ("json-bert", 0, js), ("json-auto", 4, js),
                         ("json-all-lines", 6, js)]:
    open("%s/%s" % (out, name), "wb").write(bytes([byte]) + text.encode())
