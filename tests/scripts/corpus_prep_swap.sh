#!/usr/bin/env bash
# cloze-prep shards into a directory that already holds a good shard set: the
# new set replaces it only when complete (corpus_tools/prep_set.c), so every
# failure leaves the old set byte-identical and verifiable.
#   corpus_prep_swap.sh PREP swap       an error (no text), kill -9 mid-run, a
#                                       second run on a locked directory, a
#                                       good run (old set removed), the
#                                       pre-set flat layout replaced
#   corpus_prep_swap.sh PREP disk-full  a full disk (a 2 MiB tmpfs mounted
#                                       here; exit 77 where mounting is not
#                                       allowed)
set -euo pipefail
PREP=$1
MODE=${2:-swap}
PY=${CLOZE_PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/cloze-prep-swap-XXXXXX)
MNT=""
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
. "$(dirname "$0")/prep_common.sh"
"$PY" "$HERE/byte_vocab.py" "$T"
V="--vocab $T/encoder.json --merges $T/vocab.bpe"

# text: N documents of a few lines, each unique
make_text() { # make_text FILE N TAG
    "$PY" - "$@" <<'EOF'
import sys
path, n, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path, "w") as f:
    for i in range(n):
        f.write(f"{tag} document {i} begins.  It has two lines of text\nand a second one, {i * 7919 % 104729}.\n\n")
EOF
}
# every file of a set, with its SHA-256 (the lock file and what a killed run
# left in its staging directory are not part of it)
fingerprint() {
    (cd "$1" && find . -path './.set-*.staging' -prune -o -type f ! -name .cloze-prep.lock -print |
        LC_ALL=C sort | xargs -r sha256sum)
}
intact() { # intact DIR WANT: the old set is byte-identical and verifies
    fingerprint "$1" >"$T/now" && cmp -s "$T/now" "$2" &&
        "$PREP" verify "$1/train.manifest" >/dev/null && "$PREP" verify "$1/heldout.manifest" >/dev/null
}
staging_left() { ls -A "$1" | grep -c '^\.set-.*\.staging$'; }

if [ "$MODE" = disk-full ]; then
    MNT="$T/mnt"
    mkdir -p "$MNT"
    if ! mount -t tmpfs -o size=2m tmpfs "$MNT" 2>"$T/mount.err"; then
        echo "skip: cannot mount a tmpfs for the full-disk case ($(head -1 "$T/mount.err"))"
        MNT=""
        exit 77
    fi
    D="$MNT/s"
    make_text "$T/small.txt" 300 old
    check "the old set (about 100 KB)" "$PREP" shards $V --quiet --out "$D" --shards 3 --heldout 0.2 "$T/small.txt" 2>/dev/null
    fingerprint "$D" >"$T/before"
    free_before=$(df --output=avail "$MNT" | tail -1)
    # 2.4 MB of text -> 8 shards of 600 KB: the disk fills while the shards
    # are finished one after the other (each shard's buffer is 1 MiB)
    make_text "$T/big.txt" 24000 new
    if "$PREP" shards $V --quiet --out "$D" --shards 8 --heldout 0.2 "$T/big.txt" 2>"$T/err"; then
        echo "FAIL: the run on a full disk exited 0"
        fail=1
    fi
    check "one error line saying the disk is full ($(head -c 300 "$T/err"))" test "$(grep -c . "$T/err")" -eq 1 -a "$(grep -c 'No space left on device' "$T/err")" -eq 1
    check "old set byte-identical and verifiable after the full disk" intact "$D" "$T/before"
    check "no staging directory left" test "$(staging_left "$D")" -eq 0
    check "the space is given back" test "$(df --output=avail "$MNT" | tail -1)" -ge $((free_before - 8))
    # and once there is room again, the same command replaces the set
    make_text "$T/mid.txt" 600 mid
    check "a run that fits replaces the set" "$PREP" shards $V --quiet --out "$D" --shards 3 "$T/mid.txt" 2>/dev/null
    check "the new set verifies" "$PREP" verify "$D/train.manifest" >/dev/null
    check "no heldout.manifest (the new run has none)" test ! -e "$D/heldout.manifest"
    check "only the new set directory is left" test "$(ls "$D")" = "set-0002$(printf '\ntrain.manifest')"
    [ $fail -eq 0 ] && echo ok
    exit $fail
fi

D="$T/s"
make_text "$T/small.txt" 300 old
check "the old set" "$PREP" shards $V --quiet --out "$D" --shards 3 --heldout 0.2 "$T/small.txt" 2>/dev/null
fingerprint "$D" >"$T/before"

# ---- an error after the shards were written: inputs with no text
printf '\n \n\t\n' >"$T/blank.txt"
rc=0
"$PREP" shards $V --quiet --out "$D" --shards 3 "$T/blank.txt" 2>"$T/err" || rc=$?
check "no text: exit non-zero, one line ($(cat "$T/err"))" test $rc -ne 0 -a "$(grep -c . "$T/err")" -eq 1
check "no text: the error says so" grep -q "no document in any shard" "$T/err"
check "old set intact after an error" intact "$D" "$T/before"
check "no staging directory left after an error" test "$(staging_left "$D")" -eq 0
# an unreadable input among good ones
head -c 3000 /dev/zero >"$T/blob.bin"
expect_error "a binary input among good ones is refused" "$T/blob.bin" \
    "$PREP" shards $V --quiet --out "$D" --shards 3 "$T/small.txt" "$T/blob.bin"
check "old set intact after a binary input" intact "$D" "$T/before"

# ---- kill -9 in the middle of a run, and a second run while one holds the
# directory. The writer's temporary files appear when the run starts, so the
# run is stopped (SIGSTOP) inside its work, then killed.
# (yes ends by SIGPIPE when head has enough: its status is not the test's)
head -c 60000000 < <(yes 'A long run of text that keeps the tokenizer busy for a while.') >"$T/huge.txt"
"$PREP" shards $V --quiet --out "$D" --shards 3 "$T/huge.txt" 2>/dev/null &
pid=$!
for _ in $(seq 1000); do
    ls "$D"/.set-*.staging/train-00000.bin.tmp.* >/dev/null 2>&1 && break
    sleep 0.01
done
kill -STOP $pid
rc=0
"$PREP" shards $V --quiet --out "$D" --shards 3 "$T/small.txt" 2>"$T/err" || rc=$?
check "a second run on the same directory is refused" test $rc -ne 0
check "... naming the holder's pid ($(cat "$T/err"))" grep -q "another cloze-prep shards (host .*, pid $pid) is writing this directory" "$T/err"
kill -KILL $pid
rc=0
wait $pid 2>/dev/null || rc=$?
check "the first run ended by SIGKILL (status $rc)" test $rc -eq 137
check "old set intact after kill -9" intact "$D" "$T/before" || diff "$T/now" "$T/before"
check "the killed run left its staging directory" test "$(staging_left "$D")" -eq 1

# ---- a good run: the new set replaces the old one, the leftover goes
make_text "$T/new.txt" 200 new
check "a good run replaces the set" "$PREP" shards $V --out "$D" --shards 2 --heldout 0.2 "$T/new.txt" 2>"$T/err"
check "it says it removed the leftover" grep -q "removing what an interrupted cloze-prep shards left" "$T/err"
check "the new set verifies" "$PREP" verify "$D/train.manifest" >/dev/null
check "the new heldout set verifies" "$PREP" verify "$D/heldout.manifest" >/dev/null
check "the new set holds the new text" test "$("$PREP" inspect --docs 1 "$D/set-0003/train-00000.bin" | sed -n 5p)" = "new document 0 begins.  It has two lines of text"
check "only set-0003 is left" test "$(ls -A "$D" | tr '\n' ' ')" = ".cloze-prep.lock heldout.manifest set-0003 train.manifest "
check "the manifests name set-0003" test "$(grep -c '^shard set-0003/' "$D/train.manifest")" -eq 2

# ---- a directory in the layout of cloze-prep before set directories
# (shards straight in DIR): replaced the same way, its shards removed
L="$T/legacy"
cp -r "$D" "$L"
mv "$L"/set-0003/* "$L"/ && rmdir "$L/set-0003"
sed -i 's#^shard set-0003/#shard #' "$L/train.manifest" "$L/heldout.manifest"
touch "$L/notes.txt"
check "the flat layout verifies" "$PREP" verify "$L/train.manifest" >/dev/null
check "a run over the flat layout" "$PREP" shards $V --quiet --out "$L" --shards 2 "$T/small.txt" 2>/dev/null
check "flat shards removed, other files kept" test "$(ls "$L" | tr '\n' ' ')" = "notes.txt set-0001 train.manifest "

[ $fail -eq 0 ] && echo ok
exit $fail
