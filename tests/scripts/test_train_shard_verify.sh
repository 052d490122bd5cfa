#!/usr/bin/env bash
# Training verifies shard payloads: bits flipped in a shard's token ids
# (still below the vocabulary size, so no id check notices) make cloze-train
# refuse with one line naming the file and the payload's offset range; the
# code before this test trained on them silently. The first start records
# the verified shards in <manifest>.verified and later starts skip the pass;
# a write to the shard invalidates that record even when its mtime is put
# back (ctime changes).
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-shard-verify-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
run() { # run NAME SET: 1 rank, 3 steps on the shard copy SET; rc in $rc, log in NAME.log
  set +e
  mpi 1 "$BIN/cloze-train" $(tiny_args "$data" "$work/$1") \
    --set data.train_manifest="$work/$2/train.manifest" --set train.steps=3 \
    --set train.global_batch=2 --set train.micro_batch=2 2> "$work/$1.log"
  rc=$?
  set -e
}
copy() { cp -r "$data/shards" "$work/$1"; rm -f "$work/$1"/*.verified; }
# flip bits in one token id of the first shard of set $1, keeping it below
# the vocabulary size and >= 5 (no special token), and put the mtime back;
# prints the shard's path and payload range
flip() {
  local shard
  shard=$(awk '$1 == "shard" { print $2; exit }' "$work/$1/train.manifest")
  case $shard in /*) ;; *) shard=$work/$1/$shard ;; esac
  $PY - "$shard" <<'PY'
import os, struct, sys
p = sys.argv[1]
st = os.stat(p)
with open(p, "r+b") as f:
    h = f.read(128)
    width, = struct.unpack_from("<I", h, 12)
    vocab, = struct.unpack_from("<I", h, 24)
    n_tokens, = struct.unpack_from("<Q", h, 32)
    tok_off, = struct.unpack_from("<Q", h, 56)
    fmt = "<H" if width == 2 else "<I"
    for i in range(n_tokens // 2, n_tokens):
        f.seek(tok_off + i * width)
        old, = struct.unpack(fmt, f.read(width))
        new = [old ^ b for b in (1, 2, 4, 8, 16) if 5 <= (old ^ b) < vocab]
        if old >= 5 and new:
            break
    f.seek(tok_off + i * width)
    f.write(struct.pack(fmt, new[0]))
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
print(p, f"[128, {st.st_size})")
PY
}
refused() { # refused NAME SHARD RANGE
  [ $rc -ne 0 ] || { echo "FAIL: $1: cloze-train trained on a corrupt shard (exit 0)"; cat "$work/$1.log"; exit 1; }
  local line="$2: payload bytes $3 do not match payload_checksum (offset 88)"
  grep -qF "$line" "$work/$1.log" || { echo "FAIL: $1: no line '$line'"; cat "$work/$1.log"; exit 1; }
}

# corrupt shards are refused
copy a
read -r shard range <<<"$(flip a)"
run corrupt a
refused corrupt "$shard" "$range"

# the cache: the first start verifies and records, the second skips the
# pass, a write to a shard (mtime put back) is verified again
copy b
run first b
[ $rc -eq 0 ] || { echo "FAIL: good shards refused"; cat "$work/first.log"; exit 1; }
grep -q "verified the payloads of [1-9][0-9]* shard(s)" "$work/first.log" ||
  { echo "FAIL: the first start did not verify the payloads"; cat "$work/first.log"; exit 1; }
[ -s "$work/b/train.manifest.verified" ] || { echo "FAIL: no cache beside the manifest"; exit 1; }
run second b
[ $rc -eq 0 ] || { echo "FAIL: second start refused"; cat "$work/second.log"; exit 1; }
if grep -q "verified the payloads" "$work/second.log"; then
  echo "FAIL: unchanged shards verified again (cache ignored)"; cat "$work/second.log"; exit 1
fi
read -r shard range <<<"$(flip b)"
run cached b
refused cached "$shard" "$range"
echo "test_train_shard_verify: ok"
