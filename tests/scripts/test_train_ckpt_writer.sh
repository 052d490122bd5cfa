#!/usr/bin/env bash
# train.ckpt_writer = auto (issue 15, item 9): rank 0 writes its checkpoints
# in a background thread only when a CPU it may use is left over by the
# threads of the ranks sharing its CPUs, else inline; it says which once at
# start-up. Under taskset -c 0 (1 CPU, 1 rank x 1 thread) it writes inline,
# under taskset -c 0,1 in the thread, and 2 ranks x 1 thread on 2 CPUs
# inline again; the files are byte-identical either way.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
online=$(getconf _NPROCESSORS_ONLN)
[ "$online" -ge 2 ] || { echo "SKIP: needs 2 online CPUs to give a rank a free one (has $online)"; exit 77; }
work=$(mktemp -d /tmp/cloze-ckpt-writer-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
run() { # run NAME CPUS RANKS RUN_DIR ARGS...: log in NAME.log
  local name=$1 cpus=$2 n=$3 dir=$4; shift 4
  taskset -c "$cpus" mpirun --oversubscribe --bind-to none -np "$n" "$BIN/cloze-train" \
    $(tiny_args "$data" "$dir") --set train.steps=4 --set train.ckpt_every=2 --set train.keep_last=3 \
    --set train.global_batch=2 --set train.micro_batch=1 --set train.ckpt_writer=auto "$@" 2> "$work/$name.log" ||
    { cat "$work/$name.log"; echo "FAIL: $name exited non-zero"; exit 1; }
}
expect() { # expect NAME REGEX WHAT
  grep -Eq "$2" "$work/$1.log" || { cat "$work/$1.log"; echo "FAIL: $1: $3"; exit 1; }
}
run one 0 1 "$work/run"
expect one 'checkpoints written inline, training waits \(train.ckpt_writer=auto: 1 rank\(s\) x 1 thread\(s\) on 1 allowed CPU\(s\) of this node: none is free\)' \
  "1 rank x 1 thread on 1 CPU must write inline"
mkdir "$work/inline" && cp "$work/run"/ckpt-*.lz4 "$work/inline/"
run two 0,1 1 "$work/run" --start-fresh
expect two 'checkpoints written by a background thread \(train.ckpt_writer=auto: 1 rank\(s\) x 1 thread\(s\) on 2 allowed CPU\(s\) of this node: one is free\)' \
  "1 rank x 1 thread on 2 CPUs must write in the thread"
for s in 2 4; do
  f=$(printf 'ckpt-%08d.lz4' $s)
  cmp "$work/inline/$f" "$work/run/$f" || { echo "FAIL: $f differs between inline and background writes"; exit 1; }
done
run shared 0,1 2 "$work/shared"
expect shared 'checkpoints written inline, training waits \(train.ckpt_writer=auto: 2 rank\(s\) x 1 thread\(s\) on 2 allowed CPU\(s\) of this node: none is free\)' \
  "2 ranks x 1 thread on 2 CPUs must write inline"
run forced 0 1 "$work/forced" --set train.ckpt_writer=thread
expect forced 'checkpoints written by a background thread \(train.ckpt_writer=thread\)' "thread must be obeyed"
"$BIN/cloze-ckpt" verify "$work/forced/ckpt-00000004.lz4" > /dev/null || { echo "FAIL: forced thread: bad checkpoint"; exit 1; }
echo "test_train_ckpt_writer: ok"
