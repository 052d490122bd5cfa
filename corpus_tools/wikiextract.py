#!/usr/bin/env python3
"""WikiExtractor (PyPI wikiextractor 3.1.0) with its section headings marked.

WikiExtractor writes a section heading as a line of its own, the title plus
'.' ("Britain vs. France, Spain, Mysore, and Holland 1778-1783."), which
nothing in its default output tells apart from a paragraph. Its own
compact() can mark them ("## " before the title: mark_headers, which its
clean_markup uses); its command line does not ask for it. This runs its
command line with that mark on, so that cloze-prep drops the headings by
the mark (a line that starts with '#' is no text passage) rather than by a
guess from their length (docs/formats.md, "Text passages").

    VENV/bin/python corpus_tools/wikiextract.py ARGS...    (WikiExtractor's ARGS)
"""
import inspect
import sys

try:
    from wikiextractor import WikiExtractor, extract
except ImportError:
    sys.exit("wikiextract.py: run it with the Python of WikiExtractor's venv (pip install "
             "wikiextractor==3.1.0)")

_compact = extract.compact
if "mark_headers" not in inspect.signature(_compact).parameters:
    sys.exit("wikiextract.py: this WikiExtractor's compact() has no mark_headers; use "
             "wikiextractor 3.1.0")


def compact_marked(text, mark_headers=False, extractor=None):
    # clean_text calls the module's compact by name: every extraction process
    # (forked from this one) sees this one
    return _compact(text, mark_headers=True, extractor=extractor)


extract.compact = compact_marked
sys.argv[0] = "WikiExtractor"
WikiExtractor.main()
