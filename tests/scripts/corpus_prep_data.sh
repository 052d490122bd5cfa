#!/usr/bin/env bash
# cloze-prep on real text from ../shared/data (skipped when absent):
#   - WikiText-2 valid (BERT uncased WordPiece, --wikitext-detok, 2 threads,
#     10% heldout): 60 articles -> 60 documents, verify passes, the first
#     article decodes to its first sentence
#   - a Gutenberg book (GPT-2 BPE): hard-wrapped CRLF lines are joined into
#     the paragraph, decoded byte-exactly
#   - the Windows-1252 oddity: only the text between the START/END markers is
#     kept, and the invalid bytes counted equal Python's UTF-8 'replace' count
set -u
PREP=$1
D=${CLOZE_SHARED_DATA:-}
PY=${CLOZE_PYTHON:-python3}
[ -n "$D" ] && [ -f "$D/corpus/wikitext-2-raw/wiki.valid.raw" ] && [ -f "$D/vocab/gpt2/vocab.bpe" ] ||
    { echo "skip: no shared data"; exit 77; }
T=$(mktemp -d /tmp/cloze-prep-data-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
check() {
    local what=$1
    shift
    if ! "$@"; then
        echo "FAIL: $what"
        fail=1
        return 1
    fi
}
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
for s in "$T"/w/*.bin; do "$PREP" inspect --docs 1000 "$s"; done >"$T/w.txt"
check "wikitext first sentence decoded" grep -qxF "$want" "$T/w.txt"
# --wikitext-detok: "@-@" must be gone, "lobster-like"-style hyphens kept
check "no @-@ left after --wikitext-detok" test "$(grep -c '@ - @' "$T/w.txt")" -eq 0
check "@-@ joined by --wikitext-detok" grep -qF "are red or red - tipped ," "$T/w.txt"

# ---- a Gutenberg book, GPT-2 BPE
check "gutenberg shards" "$PREP" shards $GPT2 --quiet --out "$T/g" --shards 1 --format gutenberg \
    "$D/corpus/gutenberg/pg11.txt" 2>/dev/null
want="Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: once or twice she had peeped into the book her sister was reading, but it had no pictures or conversations in it, 'and what is the use of a book,' thought Alice 'without pictures or conversations?'"
check "gutenberg verify" "$PREP" verify "$T/g/train.manifest" >/dev/null
check "wrapped lines joined into the first sentence" test "$("$PREP" inspect --docs 1 "$T/g/train-00000.bin" | sed -n 5p)" = "$want"

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
    "$PREP" inspect --docs 1 "$T/o/train-00000.bin" >"$T/o.txt"
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
