#!/usr/bin/env bash
# What a run says and leaves when it resumes or cannot (issue 37), on 2 ranks:
# 1. --resume PATH whose checkpoint is gone fails with one line naming it,
#    and leaves nothing: no train.run_dir (nor the parent it made) when they
#    did not exist, no run.lock in an empty one that did; an earlier run's
#    run.lock stays (its holder line names the last job that took it).
# 2. --resume auto says its decision in one line: a train.run_dir that did
#    not exist (a mistyped path, a first start), one that holds no
#    checkpoint, and the checkpoint it resumed from.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-resume-start-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
train() { # train RUN_DIR ARGS...: 2 ranks, 4 steps; rc, log (stderr)
  local run=$1
  shift
  rc=0
  mpi 2 "$BIN/cloze-train" $(tiny_args "$data" "$run") --set train.steps=4 \
    --set train.global_batch=4 --set train.micro_batch=2 "$@" >"$work/out" 2>"$work/log" || rc=$?
  log=$(cat "$work/log")
}

# 1. a checkpoint that is not there
train "$work/new/typo" --resume "$work/new/typo/ckpt-00000002.lz4"
[ "$rc" -ne 0 ] || fail "--resume of a missing checkpoint exited 0"
[ "$(grep -c 'error' <<<"$log")" -eq 1 ] && grep -q "ckpt-00000002.lz4: cannot open" <<<"$log" ||
  fail "--resume of a missing checkpoint: want one error line naming it: $log"
[ ! -e "$work/new" ] || fail "a failed --resume left $(find "$work/new")"
mkdir "$work/empty"
train "$work/empty" --resume "$work/gone.lz4"
[ "$rc" -ne 0 ] || fail "--resume of a missing checkpoint (existing dir) exited 0"
[ -z "$(ls -A "$work/empty")" ] || fail "a failed --resume left $(ls -A "$work/empty") in an empty run directory"
mkdir "$work/old"
echo "host earlier, pid 1" >"$work/old/run.lock"
train "$work/old" --resume "$work/gone.lz4"
[ -e "$work/old/run.lock" ] || fail "a failed --resume removed an earlier run's run.lock"

# 2. --resume auto: the decision in one line
train "$work/first/run" --resume auto
[ "$rc" -eq 0 ] || fail "--resume auto on a new directory: exit $rc: $log"
n=$(grep -c -- "--resume auto: no checkpoint in $work/first/run, starting fresh at step 0 (it did not exist: created now; a mistyped train.run_dir?)" <<<"$log" || true)
[ "$n" -eq 1 ] || fail "--resume auto on a directory that did not exist: want its one line, got: $log"
mkdir "$work/blank"
train "$work/blank" --resume auto
n=$(grep -c -- "--resume auto: no checkpoint in $work/blank, starting fresh at step 0 (it holds none)" <<<"$log" || true)
[ "$n" -eq 1 ] || fail "--resume auto on an empty directory: want its one line, got: $log"
last=$(ls "$work/blank"/ckpt-*.lz4 | tail -n1)
train "$work/blank" --resume auto --set train.steps=6
n=$(grep -c -- "resumed from $last: step 4" <<<"$log" || true)
[ "$n" -eq 1 ] || fail "--resume auto with checkpoints: want one line naming $last, got: $log"
! grep -q "starting fresh" <<<"$log" || fail "--resume auto with checkpoints says it starts fresh: $log"

[ "$fails" -eq 0 ] || exit 1
echo "ok: a failed --resume leaves nothing; --resume auto says what it did"
