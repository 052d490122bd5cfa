#!/usr/bin/env bash
# cloze-prep on real text from ../shared/data (skipped when absent):
#   - WikiText-2 valid (BERT uncased WordPiece, --wikitext-detok, 2 threads,
#     10% heldout): 60 articles -> 60 documents, verify passes, the first
#     article decodes to its first sentence
#   - GPT-2 BPE (GPT mode, byte-exact): a Gutenberg book and WikiText
#     articles decode to exactly the bytes tests/scripts/gpt_documents.py cuts
#     from the files (CRLF hard wraps, blank lines, headings, leading spaces);
#     tokenize gives HF GPT2Tokenizer's ids on the whitespace cases of
#     tests/golden/gpt2_whitespace.jsonl
#   - the Windows-1252 oddity: only the text between the START/END markers is
#     kept, and the invalid bytes counted equal Python's UTF-8 'replace' count
set -euo pipefail
PREP=$1
D=${CLOZE_SHARED_DATA:-}
SRC_GOLDEN=${CLOZE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/golden
PY=${CLOZE_PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -n "$D" ] && [ -f "$D/corpus/wikitext-2-raw/wiki.valid.raw" ] && [ -f "$D/vocab/gpt2/vocab.bpe" ] ||
    { echo "skip: no shared data"; exit 77; }
T=$(mktemp -d /tmp/cloze-prep-data-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/prep_common.sh"
BERT="--vocab $D/vocab/bert-base-uncased/vocab.txt"
GPT2="--vocab $D/vocab/gpt2/encoder.json --merges $D/vocab/gpt2/vocab.bpe"

# ---- WikiText
check "wikitext shards" "$PREP" shards $BERT --quiet --out "$T/w" --shards 2 --threads 2 --heldout 0.1 \
    --wikitext-detok "$D/corpus/wikitext-2-raw/wiki.valid.raw" 2>"$T/w.err" || cat "$T/w.err"
check "60 articles -> 60 documents" grep -q "^cloze-prep: 60 documents" "$T/w.err"
check "wikitext verify" "$PREP" verify "$T/w/train.manifest" >/dev/null
check "wikitext heldout verify" "$PREP" verify "$T/w/heldout.manifest" >/dev/null
# The first article is "Homarus gammarus"; hand-copied from the raw file,
# lower-cased as uncased BERT does, spaced as WordPiece decodes.
want="homarus gammarus , known as the european lobster or common lobster , is a species of clawed lobster from the eastern atlantic ocean , mediterranean sea and parts of the black sea ."
for s in $(shards_of "$T/w/train.manifest") $(shards_of "$T/w/heldout.manifest"); do
    "$PREP" inspect --docs 1000 "$s"
done >"$T/w.txt"
check "wikitext first sentence decoded" grep -qxF "$want" "$T/w.txt"
# --wikitext-detok: "@-@" must be gone, "lobster-like"-style hyphens kept
check "no @-@ left after --wikitext-detok" test "$(grep -c '@ - @' "$T/w.txt")" -eq 0
check "@-@ joined by --wikitext-detok" grep -qF "are red or red - tipped ," "$T/w.txt"

# ---- GPT mode: a Gutenberg book, GPT-2 BPE, is one document of exactly the
# book's bytes (hard-wrapped CRLF lines kept as they are)
book="$D/corpus/gutenberg/pg11.txt"
check "gutenberg shards" "$PREP" shards $GPT2 --quiet --out "$T/g" --shards 1 --format gutenberg "$book" 2>/dev/null
check "gutenberg verify" "$PREP" verify "$T/g/train.manifest" >/dev/null
"$PY" "$HERE/gpt_documents.py" "$book" gutenberg 0 "$T/g.want"
printf '\n' >>"$T/g.want" # inspect ends the document with a newline
"$PREP" inspect --docs 1 "$T/g/set-0001/train-00000.bin" | tail -n +5 >"$T/g.got"
check "the book decodes to its bytes ($(wc -c <"$T/g.want") bytes)" cmp -s "$T/g.got" "$T/g.want"
check "... CRLF hard wraps included" test "$(grep -c $'\r$' "$T/g.got")" -gt 3000
# WikiText with GPT-2: an article is its lines from the title on, headings,
# blank ' ' lines and the leading space of every line included
check "wikitext GPT-2 shards" "$PREP" shards $GPT2 --quiet --out "$T/wg" --shards 1 "$D/corpus/wikitext-2-raw/wiki.valid.raw" 2>"$T/wg.err"
check "60 articles -> 60 GPT documents" grep -q "^cloze-prep: 60 documents" "$T/wg.err"
for k in 0 7 59; do
    "$PY" "$HERE/gpt_documents.py" "$D/corpus/wikitext-2-raw/wiki.valid.raw" wikitext $k "$T/wg.want"
    "$PREP" inspect --docs $((k + 1)) "$T/wg/set-0001/train-00000.bin" |
        awk -v k=$k '/^--- document / { on = ($3 == k ":"); next } on' >"$T/wg.got"
    printf '\n' >>"$T/wg.want"
    check "WikiText article $k decodes to its bytes" cmp -s "$T/wg.got" "$T/wg.want"
done
# tokenize: HF GPT2Tokenizer's ids for the whitespace cases (leading,
# trailing, repeated whitespace, tabs, CR, newlines), each case as one text
"$PY" - "$SRC_GOLDEN/gpt2_whitespace.jsonl" "$T" <<'EOF'
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
with open(sys.argv[2] + "/ws.in", "wb") as f, open(sys.argv[2] + "/ws.want", "w") as w:
    for c in cases:  # line mode: the cases without a '\n' inside
        if "\n" not in c["text"]:
            f.write(c["text"].encode() + b"\n")
            w.write(" ".join(map(str, c["ids"])) + "\n")
for i, c in enumerate(cases):  # --whole: the others, one file each
    if "\n" in c["text"]:
        open(sys.argv[2] + "/ws.%03d" % i, "wb").write(c["text"].encode())
        open(sys.argv[2] + "/ws.%03d.want" % i, "w").write(" ".join(map(str, c["ids"])) + "\n")
EOF
"$PREP" tokenize $GPT2 <"$T/ws.in" >"$T/ws.got"
check "tokenize == HF GPT-2 on $(wc -l <"$T/ws.want") one-line whitespace cases ($(diff "$T/ws.got" "$T/ws.want" | grep -c '^<') differ)" cmp -s "$T/ws.got" "$T/ws.want"
bad=0
for f in "$T"/ws.[0-9][0-9][0-9]; do
    "$PREP" tokenize $GPT2 --whole <"$f" | cmp -s - "$f.want" || bad=$((bad + 1))
done
check "tokenize --whole == HF GPT-2 on the multi-line whitespace cases ($bad differ)" test $bad -eq 0

# ---- the Windows-1252 oddity (auto-detected as Gutenberg by its markers)
odd="$D/corpus/oddities/pg2641-cp1252.txt"
if [ -f "$odd" ]; then
    want=$("$PY" -c "
import sys
b = open(sys.argv[1], 'rb').read()
s = b.index(b'\n', b.index(b'*** START OF')) + 1
e = b.index(b'*** END OF')
print(b[s:e].decode('utf-8', 'replace').count('\ufffd'))" "$odd")
    check "cp1252 shards" "$PREP" shards $BERT --quiet --out "$T/o" --shards 1 "$odd" 2>"$T/o.err"
    check "invalid bytes counted ($want, Python's replace count)" grep -q " $want invalid bytes replaced" "$T/o.err" || cat "$T/o.err"
    check "cp1252 verify" "$PREP" verify "$T/o/train.manifest" >/dev/null
    "$PREP" inspect --docs 1 "$T/o/set-0001/train-00000.bin" >"$T/o.txt"
    check "text after the START marker kept" grep -qx "a room with a view" "$T/o.txt"
    check "licence after the END marker dropped" test "$(grep -ci "full license" "$T/o.txt")" -eq 0
fi

# ---- tokenize: stdin lines -> ids equal to Hugging Face BertTokenizer's for
# the 10,570 SQuAD dev questions (golden ids from swift-transformers)
G="$D/vocab/golden/swift-transformers"
if [ -f "$G/question_tokens.json" ]; then
    "$PY" -c "
import json, sys
for q in json.load(open(sys.argv[1])): print(q['original'].replace('\\n', ' '))" "$G/question_tokens.json" >"$T/q.txt"
    "$PY" -c "
import json, sys
for ids in json.load(open(sys.argv[1])): print(' '.join(map(str, ids)))" "$G/tokenized_questions.json" >"$T/q.want"
    "$PREP" tokenize $BERT <"$T/q.txt" >"$T/q.got"
    check "tokenize == HF ids on $(wc -l <"$T/q.want") questions ($(diff "$T/q.got" "$T/q.want" | grep -c '^<') differ)" cmp -s "$T/q.got" "$T/q.want"
fi

[ $fail -eq 0 ] && echo ok
exit $fail
