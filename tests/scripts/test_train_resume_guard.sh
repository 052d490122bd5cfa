#!/usr/bin/env bash
# Resume guards, on 2 ranks: a resume whose configuration changes what the
# run means (train.seed, optim.lr, train.global_batch: the "refused" keys of
# docs/config.md) is refused with one error line naming the checkpoint and
# each key with its old and new value, exit 1, the run directory's
# checkpoints, metrics and config untouched; --allow-config-change continues
# (with a warning naming them); a harmless change (train.log_every) is
# accepted and logged; a 2-rank checkpoint resumes on 1 rank with the same
# global batch (another micro-batch too), but not with another global batch.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-resume-guard-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); [ -n "${CLOZE_TEST_KEEP_GOING:-}" ] || exit 1; }
common() { tiny_args "$data" "$1"; echo --set train.steps=8 --set train.global_batch=4 \
  --set train.micro_batch=2 --set train.ckpt_every=4 --set train.keep_last=10 --set train.seed=1; }
# the files a refused resume must leave as they were (run.lock names its holder)
sums() { (cd "$1" && sha256sum ckpt-*.lz4 metrics.jsonl config.cfg); }

mpi 2 "$BIN/cloze-train" $(common "$work/run") --set train.stop_after_steps=4
ck=$work/run/ckpt-00000004.lz4
[ -f "$ck" ] || fail "no checkpoint at step 4"
for c in a b c d e; do cp -r "$work/run" "$work/$c"; done

# refused NAME RUN_DIR PATTERN NP -- args...: exit 1, one error line matching
# PATTERN (a grep -F string), no MPI_Abort banner, the run directory unchanged
refused() {
  local name=$1 dir=$2 pattern=$3 np=$4
  shift 5
  local out=$work/$name.out rc=0
  sums "$dir" > "$work/$name.before"
  mpi "$np" "$BIN/cloze-train" "$@" --resume auto > "$out" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1: $(cat "$out")"
  local lines
  lines=$(grep -c 'error' "$out" || true)
  [ "$lines" -eq 1 ] || fail "$name: $lines error lines, expected 1: $(grep error "$out")"
  grep 'error' "$out" | grep -qF -- "$pattern" || fail "$name: the error does not say '$pattern': $(grep error "$out")"
  grep 'error' "$out" | grep -qF -- "--allow-config-change" || fail "$name: the error does not name the option"
  ! grep -q 'MPI_ABORT\|ORTE_ERROR' "$out" || fail "$name: MPI_Abort's banner: $(cat "$out")"
  ! grep -q 'resumed from' "$out" || fail "$name: it resumed anyway"
  sums "$dir" | cmp -s - "$work/$name.before" || fail "$name: the run directory changed: $(sums "$dir" | diff - "$work/$name.before")"
}

# (a) another seed and learning rate: refused, both named with their values
refused seed "$work/a" "a/ckpt-00000004.lz4: config: train.seed 1 -> 7, optim.lr 0.001 -> 0.002 differ from the checkpoint's run" 2 -- \
  $(common "$work/a") --set train.seed=7 --set optim.lr=2e-3
[ ! -e "$work/a/ckpt-00000008.lz4" ] || fail "seed: a refused run wrote a checkpoint"
# --resume PATH is guarded too
refused seed_path "$work/a" "train.seed 1 -> 7" 2 -- $(common "$work/a") --set train.seed=7 --resume "$work/a/ckpt-00000004.lz4"

# (b) the same with --allow-config-change: continues, warned
mpi 2 "$BIN/cloze-train" $(common "$work/b") --set train.seed=7 --set optim.lr=2e-3 \
  --allow-config-change --resume auto 2> "$work/allow.log" || fail "allow: exit non-zero: $(cat "$work/allow.log")"
grep -q "resumed from .*b/ckpt-00000004.lz4" "$work/allow.log" || fail "allow: no resume: $(cat "$work/allow.log")"
grep "warn" "$work/allow.log" | grep -qF -- "--allow-config-change: continuing as another run: train.seed 1 -> 7, optim.lr 0.001 -> 0.002" ||
  fail "allow: no warning naming the changes: $(cat "$work/allow.log")"
[ -f "$work/b/ckpt-00000008.lz4" ] || fail "allow: the run did not reach step 8"
grep -q 'seed = 7L' "$work/b/config.cfg" || fail "allow: config.cfg does not hold the new seed"

# (c) a harmless change: accepted, logged in one line naming it
mpi 2 "$BIN/cloze-train" $(common "$work/c") --set train.log_every=2 --resume auto 2> "$work/log.log" ||
  fail "log_every: exit non-zero: $(cat "$work/log.log")"
grep "info" "$work/log.log" | grep "accepted changes from the checkpoint's run" | grep -qF "train.log_every 1 -> 2" ||
  fail "log_every: the accepted change is not logged: $(cat "$work/log.log")"
[ "$(grep -c "accepted changes" "$work/log.log")" -eq 1 ] || fail "log_every: not one line"
! grep -q 'warn.*config\|error' "$work/log.log" || fail "log_every: warned: $(cat "$work/log.log")"
[ -f "$work/c/ckpt-00000008.lz4" ] || fail "log_every: the run did not reach step 8"

# (d) another rank count, the same global batch (and another micro-batch): accepted
mpi 1 "$BIN/cloze-train" $(common "$work/d") --set train.micro_batch=4 --resume auto 2> "$work/one.log" ||
  fail "one rank: exit non-zero: $(cat "$work/one.log")"
grep -q "resumed from .*d/ckpt-00000004.lz4: step 4, .*(written by 2 rank(s), now 1)" "$work/one.log" ||
  fail "one rank: no resume: $(cat "$work/one.log")"
grep "accepted changes" "$work/one.log" | grep -qF "train.micro_batch 2 -> 4" || fail "one rank: micro-batch change not logged"
[ -f "$work/d/ckpt-00000008.lz4" ] || fail "one rank: the run did not reach step 8"
# ... but another global batch is another run
refused global_batch "$work/e" "train.global_batch 4 -> 8 differs from" 1 -- $(common "$work/e") --set train.global_batch=8

[ "$failures" -eq 0 ] || exit 1
echo "test_train_resume_guard: ok"
