#!/usr/bin/env bash
# cloze-prep end to end on text written here, with a byte-level BPE vocabulary
# of the 256 bytes and no merges (tests/scripts/byte_vocab.py), so that the
# expected ids and documents can be written by hand:
#   - GPT mode (BPE) is byte-exact: every document decodes to its bytes as in
#     the input (whitespace runs, tabs, CRLF, a NUL, an invalid byte), and
#     tokenize --whole | decode --whole gives back arbitrary bytes
#   - shards verify; 1 and 2 threads give byte-identical shards
#   - the heldout split is by document, deterministic, independent of --shards
#   - mpirun -np 2 gives the same documents
#   - BERT mode (a WordPiece learned here) normalises and splits sentences
#   - bad inputs (binary file, wrong vocabulary, truncated/corrupt shard) give a
#     one-line error naming the file and offset, and leave no final file
set -euo pipefail
PREP=$1
PY=${CLOZE_PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/cloze-prep-e2e-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/prep_common.sh"

# ---- vocabulary: 256 byte tokens + <|endoftext|>, merges header only
"$PY" "$HERE/byte_vocab.py" "$T"
V="--vocab $T/encoder.json --merges $T/vocab.bpe"

# ---- input: 40 documents in two files. Document i has a unique first
# line; CRLF, a NUL, a tab, a double space and an invalid byte (0x93) are in
# there, all kept: a document is its lines as they are, the last one's line
# end dropped (docs/formats.md, "GPT mode").
mkdir -p "$T/in"
: >"$T/expect.txt"
for f in 0 1; do
    for j in $(seq 0 19); do
        i=$((f * 20 + j))
        printf 'Document %d begins here.  Dr. Who paid 3.50 for tea!\tIt was "fine."\r\n' $i
        nul=''
        if [ $((i % 10)) -eq 0 ]; then nul='\x00'; fi
        printf "Second$nul paragraph of %d? Yes.\r\n\r\n" $i
        printf "Document %d begins here.  Dr. Who paid 3.50 for tea!\tIt was \"fine.\"\r\nSecond$nul paragraph of %d? Yes.\n" $i $i >>"$T/expect.txt"
    done >"$T/in/part$f.txt"
done
printf 'Odd \x93quote\x94 here.\n' >"$T/in/part2.txt"
printf 'Odd \x93quote\x94 here.\n' >>"$T/expect.txt"

run() { "$PREP" shards $V --quiet "$@" 2>"$T/stderr" || { cat "$T/stderr"; return 1; }; }

# ---- shards with 1 and 2 threads
check "shards (1 thread)" run --out "$T/o1" --shards 3 --threads 1 "$T/in"
check "summary counts kept invalid bytes" grep -q "2 invalid UTF-8 bytes kept as bytes" "$T/stderr"
check "summary counts 41 documents" grep -q "^cloze-prep: 41 documents" "$T/stderr"
check "shards (2 threads)" run --out "$T/o2" --shards 3 --threads 2 "$T/in"
check "three shards in set-0001" test "$(shards_of "$T/o1/train.manifest" | grep -c /set-0001/train-0000)" -eq 3
for k in 0 1 2; do
    check "train-0000$k.bin identical for 1 and 2 threads" cmp -s "$T/o1/set-0001/train-0000$k.bin" "$T/o2/set-0001/train-0000$k.bin"
done
check "verify" "$PREP" verify "$T/o1/train.manifest" >/dev/null

# ---- inspect decodes every document back to its bytes (one per document)
for s in $(shards_of "$T/o1/train.manifest"); do
    "$PREP" inspect --docs 1000 "$s" | grep -av -e '^---' -e '^shard ' -e '^version ' -e '^documents '
done | LC_ALL=C sort >"$T/got.txt"
LC_ALL=C sort "$T/expect.txt" >"$T/want.txt"
check "inspect output equals the documents byte for byte" cmp -s "$T/got.txt" "$T/want.txt" ||
    diff -a "$T/got.txt" "$T/want.txt" | head
check "a document is one sentence in GPT mode" test "$(for s in $(shards_of "$T/o1/train.manifest"); do "$PREP" inspect --docs 1000 "$s"; done | grep -ac '^--- document [0-9]*: 1 sentences')" -eq 41

# ---- GPT mode is lossless: tokenize keeps whitespace, decode gives the bytes back
out=$(printf '  a \t\n' | "$PREP" tokenize $V)
check "tokenize keeps leading/trailing spaces and tabs (got '$out')" test "$out" = "220 220 64 220 197"
out=$(printf 'a\r\n' | "$PREP" tokenize $V)
check "tokenize keeps a CR, drops only the line's LF (got '$out')" test "$out" = "64 201"
out=$(printf 'a\n\nb' | "$PREP" tokenize $V --whole)
check "tokenize --whole keeps newlines (got '$out')" test "$out" = "64 198 198 65"
head -c 20000 /dev/urandom >"$T/random.bin"
"$PREP" tokenize $V --whole <"$T/random.bin" >"$T/random.ids"
"$PREP" decode $V --whole <"$T/random.ids" >"$T/random.out"
check "decode --whole of tokenize --whole gives 20,000 random bytes back" cmp -s "$T/random.bin" "$T/random.out"
"$PREP" tokenize $V <"$T/in/part0.txt" | "$PREP" decode $V >"$T/part0.out"
check "decode of tokenize (line by line) gives the file back" cmp -s "$T/in/part0.txt" "$T/part0.out"
printf '64 99999\n' >"$T/bad.ids"
expect_error "decode refuses an id outside the vocabulary, naming line and column" \
    "stdin line 1 column 4: '99999' is not a token id < 257" "$PREP" decode $V <"$T/bad.ids"

# ---- heldout: by document, deterministic, independent of the shard count
docs_of() { # first sentences ("Document N begins here.") in the given shards
    for s in "$@"; do "$PREP" inspect --docs 1000 "$s"; done | grep -a '^Document' | LC_ALL=C sort
}
check "heldout run" run --out "$T/h1" --shards 2 --heldout 0.3 "$T/in"
check "heldout run again" run --out "$T/h2" --shards 2 --heldout 0.3 "$T/in"
check "heldout run, 3 shards" run --out "$T/h3" --shards 3 --heldout 0.3 "$T/in"
check "heldout shard deterministic" cmp -s "$T/h1/set-0001/heldout-00000.bin" "$T/h2/set-0001/heldout-00000.bin"
check "heldout verify" "$PREP" verify "$T/h1/heldout.manifest" >/dev/null
docs_of $(shards_of "$T/h1/heldout.manifest") >"$T/held1"
docs_of $(shards_of "$T/h3/heldout.manifest") >"$T/held3"
docs_of $(shards_of "$T/h1/train.manifest") >"$T/train1"
nh=$(wc -l <"$T/held1")
nt=$(wc -l <"$T/train1")
check "some documents held out ($nh) and some not ($nt)" test "$nh" -gt 3 -a "$nt" -gt 15
check "held out + train = all 40 documents, none in both" test "$(sort -u "$T/held1" "$T/train1" | wc -l)" -eq 40 -a $((nh + nt)) -eq 40
check "heldout set independent of --shards" cmp -s "$T/held1" "$T/held3"
# a held-out document is whole: all its 5 sentences are in the heldout shard
first=$(head -1 "$T/held1" | sed 's/Document \([0-9]*\).*/\1/')
check "held-out document $first is whole" test "$("$PREP" inspect --docs 1000 "$T"/h1/set-0001/heldout-00000.bin | grep -ac "of $first? Yes")" -eq 1

# ---- two MPI ranks: every rank writes its shards, rank 0 the manifest
if command -v mpirun >/dev/null; then
    check "mpirun -np 2" mpirun --oversubscribe -np 2 "$PREP" shards $V --quiet --out "$T/m" --shards 4 --heldout 0.3 "$T/in/part0.txt" "$T/in/part1.txt" "$T/in/part2.txt"
    check "mpi verify" "$PREP" verify "$T/m/train.manifest" >/dev/null
    check "mpi heldout verify" "$PREP" verify "$T/m/heldout.manifest" >/dev/null
    check "mpi: 2 heldout shards" test -f "$T/m/set-0001/heldout-00000.bin" -a -f "$T/m/set-0001/heldout-00001.bin"
    docs_of $(shards_of "$T/m/heldout.manifest") >"$T/heldm"
    check "mpi: same held-out documents as one process" cmp -s "$T/heldm" "$T/held1"
    check "mpi: same train documents" cmp -s <(docs_of $(shards_of "$T/m/train.manifest")) "$T/train1"
fi

# ---- bad inputs
head -c 3000 /dev/zero >"$T/blob.bin"
cat "$T/in/part0.txt" >"$T/good.txt"
expect_error "binary input" "$T/blob.bin: offset 0: binary" "$PREP" shards $V --quiet --out "$T/b" --shards 1 "$T/good.txt" "$T/blob.bin"
check "no shard, manifest or staging directory left after a failed run" test -z "$(ls -A "$T/b" 2>/dev/null | grep -v '^.cloze-prep.lock$')"
expect_error "wrong vocabulary" "encoder.json" "$PREP" shards --vocab "$T/encoder.json" --quiet --out "$T/w" --shards 1 "$T/good.txt"
check "no file left after a wrong vocabulary" test -z "$(ls -A "$T/w" 2>/dev/null)"
cp -r "$T/o1" "$T/c"
size=$(stat -c %s "$T/c/set-0001/train-00001.bin")
truncate -s $((size - 5)) "$T/c/set-0001/train-00001.bin"
expect_error "truncated shard" "train-00001.bin: file_size field (offset 80)" "$PREP" verify "$T/c/train.manifest"
cp "$T/o1/set-0001/train-00001.bin" "$T/c/set-0001/train-00001.bin"
printf '\x41' | dd of="$T/c/set-0001/train-00001.bin" bs=1 seek=200 conv=notrunc status=none
expect_error "corrupt shard" "train-00001.bin: payload bytes" "$PREP" verify "$T/c/train.manifest"
expect_error "inspect corrupt shard" "train-00001.bin: payload bytes" "$PREP" inspect "$T/c/set-0001/train-00001.bin"
expect_error "not a shard" "offset 0: bad magic" "$PREP" inspect "$T/good.txt"
# the vocabulary changed after the shards were made
mkdir -p "$T/v2"
cp "$T/encoder.json" "$T/vocab.bpe" "$T/v2/"
check "shards with a copied vocabulary" "$PREP" shards --vocab "$T/v2/encoder.json" --merges "$T/v2/vocab.bpe" --quiet --out "$T/vo" --shards 1 "$T/good.txt" 2>/dev/null
echo "a b" >>"$T/v2/vocab.bpe"
expect_error "vocabulary changed since" "train.manifest: vocab line: fingerprint" "$PREP" verify "$T/vo/train.manifest"
# the same tokens but other bytes (a trailing newline): another fingerprint
mkdir -p "$T/v3"
cp "$T/encoder.json" "$T/vocab.bpe" "$T/v3/"
echo >>"$T/v3/encoder.json"
expect_error "inspect with another vocabulary" "vocab_fingerprint (offset 16)" "$PREP" inspect --vocab "$T/v3/encoder.json" --merges "$T/v3/vocab.bpe" "$T/o1/set-0001/train-00000.bin"

# ---- JSON Lines: one document per record, the string as it is (GPT mode);
# one token per byte here: 34 bytes, 16 + 1 bytes (é is 2 bytes)
printf '{"id": 1, "text": "First doc. It has \\"two\\"  sentences."}\n{"text": "Second\\ndoc \\u00e9t\\u00e9."}\n' >"$T/j.jsonl"
check "jsonl shards" run --out "$T/j" --shards 1 "$T/j.jsonl"
printf -- '--- document 0: 1 sentences, 35 tokens\nFirst doc. It has "two"  sentences.\n--- document 1: 1 sentences, 17 tokens\nSecond\ndoc \xc3\xa9t\xc3\xa9.\n' >"$T/j.want"
"$PREP" inspect "$T/j/set-0001/train-00000.bin" | tail -n +4 >"$T/j.got"
check "jsonl documents decode back" cmp -s "$T/j.got" "$T/j.want" || diff "$T/j.got" "$T/j.want"

# ---- the manifest records the vocabulary: kind, paths, SHA-256 of both files
m="$T/j/train.manifest"
check "manifest: vocab_file vocab with sha256 and absolute path" grep -qx "vocab_file vocab $(sha256sum <"$T/encoder.json" | cut -c1-64) $(realpath "$T/encoder.json")" "$m"
check "manifest: vocab_file merges" grep -qx "vocab_file merges $(sha256sum <"$T/vocab.bpe" | cut -c1-64) $(realpath "$T/vocab.bpe")" "$m"
check "manifest: the paths as given" grep -qx "vocab_given merges $T/vocab.bpe" "$m"
# inspect and verify use the recorded merges file, whatever its name
mkdir -p "$T/hf"
cp "$T/encoder.json" "$T/hf/vocab.json"
cp "$T/vocab.bpe" "$T/hf/merges.txt"
check "shards with HF-named files" run --vocab "$T/hf/vocab.json" --merges "$T/hf/merges.txt" --out "$T/hfo" --shards 1 "$T/j.jsonl"
check "verify finds merges.txt through the manifest" "$PREP" verify "$T/hfo/train.manifest" >/dev/null
check "inspect decodes through the manifest's vocabulary" test "$("$PREP" inspect "$T/hfo/set-0001/train-00000.bin" | sed -n 5p)" = 'First doc. It has "two"  sentences.'
printf ' ' >>"$T/hf/merges.txt"
expect_error "merges changed since" "vocab line: fingerprint" "$PREP" verify "$T/hfo/train.manifest"

# ---- --help of every command
for c in shards vocab tokenize decode inspect verify; do
    check "$c --help" "$PREP" $c --help >/dev/null
done

# ---- tokenize: ids of the bytes
out=$(printf 'ab\n' | "$PREP" tokenize $V)
check "tokenize 'ab' -> 64 65 (got '$out')" test "$out" = "64 65"

# ---- vocab: learn small vocabularies from the test text, then shard with
# them (WordPiece: every word of the text must be covered, no [UNK])
check "vocab wordpiece" "$PREP" vocab --kind wordpiece --size 400 --out "$T/wp.txt" "$T/in" 2>/dev/null
check "learned vocab has [UNK] at 100" test "$(sed -n 101p "$T/wp.txt")" = "[UNK]"
check "shards with learned WordPiece" "$PREP" shards --vocab "$T/wp.txt" --quiet --out "$T/lw" --shards 1 "$T/in" 2>"$T/lw.err"
check "no [UNK] with a vocabulary learned on the same text" grep -q "\[UNK\] 0.0000%" "$T/lw.err"
check "verify learned WordPiece shards" "$PREP" verify "$T/lw/train.manifest" >/dev/null
# BERT mode normalises (spaces collapsed, CR dropped) and splits sentences:
# each document is 5 sentences, one per line in inspect
"$PREP" inspect --docs 1000 $(shards_of "$T/lw/train.manifest") >"$T/lw.txt"
check "WordPiece: 40 documents of 5 sentences" test "$(grep -c '^--- document [0-9]*: 5 sentences' "$T/lw.txt")" -eq 40
check "WordPiece: sentence 1 of each document" test "$(grep -cE '^document [0-9]+ begins here \.$' "$T/lw.txt")" -eq 40
check "WordPiece: the last sentence of each" test "$(grep -cx 'yes \.' "$T/lw.txt")" -eq 40
mkdir -p "$T/lb"
check "vocab bpe" "$PREP" vocab --kind bpe --size 300 --out "$T/lb/encoder.json" "$T/in"
check "shards with learned BPE" "$PREP" shards --vocab "$T/lb/encoder.json" --merges "$T/lb/vocab.bpe" --quiet --out "$T/lbo" --shards 1 "$T/in" 2>/dev/null
check "verify learned BPE shards (fingerprint of encoder.json + vocab.bpe)" "$PREP" verify "$T/lbo/train.manifest" >/dev/null
for s in $(shards_of "$T/lbo/train.manifest"); do
    "$PREP" inspect --docs 1000 "$s" | grep -av -e '^---' -e '^shard ' -e '^version ' -e '^documents '
done | LC_ALL=C sort >"$T/lgot.txt"
check "learned BPE decodes to the documents byte for byte" cmp -s "$T/lgot.txt" "$T/want.txt"
LB="--vocab $T/lb/encoder.json --merges $T/lb/vocab.bpe"
"$PREP" tokenize $LB --whole <"$T/random.bin" | "$PREP" decode $LB --whole >"$T/random.out2"
check "learned BPE: random bytes round trip" cmp -s "$T/random.bin" "$T/random.out2"

[ $fail -eq 0 ] && echo ok
exit $fail
