#!/usr/bin/env bash
# cloze-prep end to end on text written here, with a byte-level BPE vocabulary
# of the 256 bytes and no merges (made here from GPT-2's byte-to-unicode table),
# so that decoding is byte-exact and the expected sentences can be written by
# hand:
#   - shards verify; inspect decodes to the normalised sentences
#   - 1 and 2 threads give byte-identical shards
#   - the heldout split is by document, deterministic, independent of --shards
#   - mpirun -np 2 gives the same documents
#   - bad inputs (binary file, wrong vocabulary, truncated/corrupt shard) give a
#     one-line error naming the file and offset, and leave no final file
set -u
PREP=$1
PY=${CLOZE_PYTHON:-python3}
T=$(mktemp -d /tmp/cloze-prep-e2e-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check "what" command...
    local what=$1
    shift
    if ! "$@"; then
        echo "FAIL: $what"
        fail=1
        return 1
    fi
}

# ---- vocabulary: 256 byte tokens + <|endoftext|>, merges header only
"$PY" - "$T" <<'EOF'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
enc = {chr(c): i for i, c in enumerate(cs)}
enc["<|endoftext|>"] = 256
json.dump(enc, open(sys.argv[1] + "/encoder.json", "w"), ensure_ascii=False)
open(sys.argv[1] + "/vocab.bpe", "w").write("#version: 0.2\n")
EOF
V="--vocab $T/encoder.json --merges $T/vocab.bpe"

# ---- input: 40 documents in two files. Document i has a unique first
# sentence; CRLF, a NUL, a tab run and an invalid byte (0x93) are in there.
mkdir -p "$T/in"
: >"$T/expect.txt"
for f in 0 1; do
    for j in $(seq 0 19); do
        i=$((f * 20 + j))
        printf 'Document %d begins here.  Dr. Who paid 3.50 for tea!\tIt was "fine."\r\n' $i
        nul=$([ $((i % 10)) -eq 0 ] && printf '\\x00')
        printf "Second$nul paragraph of %d? Yes.\r\n\r\n" $i
        printf 'Document %d begins here.\nDr. Who paid 3.50 for tea!\nIt was "fine."\nSecond paragraph of %d?\nYes.\n' $i $i >>"$T/expect.txt"
    done >"$T/in/part$f.txt"
done
printf 'Odd \x93quote\x94 here.\n' >"$T/in/part2.txt"
printf 'Odd \xef\xbf\xbdquote\xef\xbf\xbd here.\n' >>"$T/expect.txt"

run() { "$PREP" shards $V --quiet "$@" 2>"$T/stderr" || { cat "$T/stderr"; return 1; }; }

# ---- shards with 1 and 2 threads
check "shards (1 thread)" run --out "$T/o1" --shards 3 --threads 1 "$T/in"
check "summary counts replaced bytes" grep -q "2 invalid bytes replaced" "$T/stderr"
check "summary counts 41 documents" grep -q "^cloze-prep: 41 documents" "$T/stderr"
check "shards (2 threads)" run --out "$T/o2" --shards 3 --threads 2 "$T/in"
for k in 0 1 2; do
    check "train-0000$k.bin identical for 1 and 2 threads" cmp -s "$T/o1/train-0000$k.bin" "$T/o2/train-0000$k.bin"
done
check "verify" "$PREP" verify "$T/o1/train.manifest" >/dev/null

# ---- inspect decodes every sentence back to its normalised text
for k in 0 1 2; do
    "$PREP" inspect --docs 1000 "$T/o1/train-0000$k.bin" | grep -v -e '^---' -e '^shard ' -e '^version ' -e '^documents '
done | sort >"$T/got.txt"
sort "$T/expect.txt" >"$T/want.txt"
check "inspect output equals the normalised sentences" cmp -s "$T/got.txt" "$T/want.txt" ||
    diff "$T/got.txt" "$T/want.txt" | head

# ---- heldout: by document, deterministic, independent of the shard count
docs_of() { # first sentences ("Document N begins here.") in the given shards
    for s in "$@"; do "$PREP" inspect --docs 1000 "$s"; done | grep '^Document' | sort
}
check "heldout run" run --out "$T/h1" --shards 2 --heldout 0.3 "$T/in"
check "heldout run again" run --out "$T/h2" --shards 2 --heldout 0.3 "$T/in"
check "heldout run, 3 shards" run --out "$T/h3" --shards 3 --heldout 0.3 "$T/in"
check "heldout shard deterministic" cmp -s "$T/h1/heldout-00000.bin" "$T/h2/heldout-00000.bin"
check "heldout verify" "$PREP" verify "$T/h1/heldout.manifest" >/dev/null
docs_of "$T"/h1/heldout-*.bin >"$T/held1"
docs_of "$T"/h3/heldout-*.bin >"$T/held3"
docs_of "$T"/h1/train-*.bin >"$T/train1"
nh=$(wc -l <"$T/held1")
nt=$(wc -l <"$T/train1")
check "some documents held out ($nh) and some not ($nt)" test "$nh" -gt 3 -a "$nt" -gt 15
check "held out + train = all 40 documents, none in both" test "$(sort -u "$T/held1" "$T/train1" | wc -l)" -eq 40 -a $((nh + nt)) -eq 40
check "heldout set independent of --shards" cmp -s "$T/held1" "$T/held3"
# a held-out document is whole: all its 5 sentences are in the heldout shard
first=$(head -1 "$T/held1" | sed 's/Document \([0-9]*\).*/\1/')
check "held-out document $first is whole" test "$("$PREP" inspect --docs 1000 "$T"/h1/heldout-00000.bin | grep -c "of $first?")" -eq 1

# ---- two MPI ranks: every rank writes its shards, rank 0 the manifest
if command -v mpirun >/dev/null; then
    check "mpirun -np 2" mpirun --oversubscribe -np 2 "$PREP" shards $V --quiet --out "$T/m" --shards 4 --heldout 0.3 "$T/in/part0.txt" "$T/in/part1.txt" "$T/in/part2.txt"
    check "mpi verify" "$PREP" verify "$T/m/train.manifest" >/dev/null
    check "mpi heldout verify" "$PREP" verify "$T/m/heldout.manifest" >/dev/null
    check "mpi: 2 heldout shards" test -f "$T/m/heldout-00000.bin" -a -f "$T/m/heldout-00001.bin"
    docs_of "$T"/m/heldout-*.bin >"$T/heldm"
    check "mpi: same held-out documents as one process" cmp -s "$T/heldm" "$T/held1"
    check "mpi: same train documents" cmp -s <(docs_of "$T"/m/train-*.bin) "$T/train1"
fi

# ---- bad inputs
expect_error() { # expect_error "what" "fragment" command...
    local what=$1 frag=$2
    shift 2
    if "$@" >"$T/out" 2>"$T/err"; then
        echo "FAIL: $what: exit 0"
        fail=1
        return
    fi
    if ! grep -q -- "$frag" "$T/err" || [ "$(grep -c . "$T/err")" -ne 1 ]; then
        echo "FAIL: $what: want one line with '$frag', got:"
        cat "$T/err"
        fail=1
    fi
}
head -c 3000 /dev/zero >"$T/blob.bin"
cat "$T/in/part0.txt" >"$T/good.txt"
expect_error "binary input" "$T/blob.bin: offset 0: binary" "$PREP" shards $V --quiet --out "$T/b" --shards 1 "$T/good.txt" "$T/blob.bin"
check "no shard or manifest left after a failed run" test -z "$(ls "$T/b")"
expect_error "wrong vocabulary" "encoder.json" "$PREP" shards --vocab "$T/encoder.json" --quiet --out "$T/w" --shards 1 "$T/good.txt"
check "no file left after a wrong vocabulary" test -z "$(ls "$T/w" 2>/dev/null)"
cp -r "$T/o1" "$T/c"
size=$(stat -c %s "$T/c/train-00001.bin")
truncate -s $((size - 5)) "$T/c/train-00001.bin"
expect_error "truncated shard" "train-00001.bin: file_size field (offset 80)" "$PREP" verify "$T/c/train.manifest"
cp "$T/o1/train-00001.bin" "$T/c/train-00001.bin"
printf '\x41' | dd of="$T/c/train-00001.bin" bs=1 seek=200 conv=notrunc status=none
expect_error "corrupt shard" "train-00001.bin: payload bytes" "$PREP" verify "$T/c/train.manifest"
expect_error "inspect corrupt shard" "train-00001.bin: payload bytes" "$PREP" inspect "$T/c/train-00001.bin"
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
expect_error "inspect with another vocabulary" "vocab_fingerprint (offset 16)" "$PREP" inspect --vocab "$T/v3/encoder.json" --merges "$T/v3/vocab.bpe" "$T/o1/train-00000.bin"

# ---- JSON Lines: one document per record, "\n" in the string = paragraph;
# one token per byte here: 10 + 24 bytes, 6 + 11 bytes (é is 2 bytes)
printf '{"id": 1, "text": "First doc. It has \\"two\\" sentences."}\n{"text": "Second\\ndoc \\u00e9t\\u00e9."}\n' >"$T/j.jsonl"
check "jsonl shards" run --out "$T/j" --shards 1 "$T/j.jsonl"
printf -- '--- document 0: 2 sentences, 34 tokens\nFirst doc.\nIt has "two" sentences.\n--- document 1: 2 sentences, 17 tokens\nSecond\ndoc \xc3\xa9t\xc3\xa9.\n' >"$T/j.want"
"$PREP" inspect "$T/j/train-00000.bin" | tail -n +4 >"$T/j.got"
check "jsonl documents decode back" cmp -s "$T/j.got" "$T/j.want" || diff "$T/j.got" "$T/j.want"

# ---- --help of every command
for c in shards vocab tokenize inspect verify; do
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
mkdir -p "$T/lb"
check "vocab bpe" "$PREP" vocab --kind bpe --size 300 --out "$T/lb/encoder.json" "$T/in"
check "shards with learned BPE" "$PREP" shards --vocab "$T/lb/encoder.json" --merges "$T/lb/vocab.bpe" --quiet --out "$T/lbo" --shards 1 "$T/in" 2>/dev/null
check "verify learned BPE shards (fingerprint of encoder.json + vocab.bpe)" "$PREP" verify "$T/lbo/train.manifest" >/dev/null
for k in 0; do
    "$PREP" inspect --docs 1000 "$T/lbo/train-0000$k.bin" | grep -v -e '^---' -e '^shard ' -e '^version ' -e '^documents '
done | sort >"$T/lgot.txt"
check "learned BPE decodes to the normalised sentences" cmp -s "$T/lgot.txt" "$T/want.txt"

[ $fail -eq 0 ] && echo ok
exit $fail
