#!/usr/bin/env bash
# The run directory (issue 15, items 1, 2, 4, 6): one job at a time holds it
# (a second one, fresh or --resume auto, is refused naming the holder's host
# and pid; the lock of a killed job does not block); --resume auto with
# checkpoints of which none verifies is an error listing them, and
# --start-fresh starts over on purpose; pruning keeps the newest good
# checkpoint, does not count corrupt ones, and removes what dead writers
# left; a resumed run marks metrics.jsonl; config errors are one line
# without MPI_Abort's banner; a missing config file names its errno; an
# exploding loss is warned about.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-rundir-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
common() { tiny_args "$data" "$1"; echo --set train.global_batch=4 --set train.micro_batch=2; }
failures=0
# (CLOZE_TEST_KEEP_GOING=1: report every failing check, to see which fail on old code)
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  [ -n "${CLOZE_TEST_KEEP_GOING:-}" ] || exit 1
}
ck() { printf '%s/ckpt-%08d.lz4' "$1" "$2"; }

# 1. a second job on a run directory in use is refused, fresh or resuming;
# the holder's config.cfg is untouched; a killed holder's lock does not block.
# The holder writes no checkpoint (ckpt_every = 0: only at its end), so a
# fresh second job is refused for the lock, not for the holder's checkpoints
# (the code before the lock refused only those, and ran both jobs to the end)
# (10^8 steps: the tiny model runs thousands of steps a second, and the
# holder must outlive the second jobs; one rank, so that a core is left for
# them to start on: with two ranks busy on both cores of the 2-vCPU guest a
# second job took minutes to get through MPI_Init)
mpirun --oversubscribe -np 1 "$BIN/cloze-train" $(common "$work/lock") --set train.steps=100000000 \
  --set train.ckpt_every=0 2> "$work/holder.log" &
holder=$!
for _ in $(seq 300); do [ -s "$work/lock/metrics.jsonl" ] && break; sleep 0.1; done
[ -s "$work/lock/metrics.jsonl" ] || { cat "$work/holder.log"; fail "the holder did not start"; }
for how in fresh auto; do
  extra=(); [ $how = auto ] && extra=(--resume auto)
  if "$BIN/cloze-train" $(common "$work/lock") --set train.steps=3 "${extra[@]}" 2> "$work/second.log"; then
    fail "a second ($how) job in a run directory in use exited 0"
  fi
  grep -Eq "another cloze-train job \(host $(hostname), pid [0-9]+\) is using this run directory" \
    "$work/second.log" || { cat "$work/second.log"; fail "no holder in the refusal ($how)"; }
done
kill -0 $holder 2>/dev/null || fail "the holder ended before the second jobs were tried: nothing was shown"
grep -Eq "^ *steps = 100000000L?;" "$work/lock/config.cfg" || fail "the refused job rewrote config.cfg"
kill -KILL $(pgrep -f "cloze-train.*$work/lock" | grep -v "^$holder$") 2>/dev/null || true
wait $holder 2>/dev/null || true
"$BIN/cloze-train" $(common "$work/lock") --set train.steps=100000 --set train.stop_after_steps=1 \
  --resume auto 2> "$work/after.log" ||
  { cat "$work/after.log"; fail "the lock of a killed job blocked the next one"; }
echo "run directory lock: ok"

# 2. --resume auto where every checkpoint is unreadable: an error naming
# them and --start-fresh; nothing pruned; --start-fresh then runs
mpi 2 "$BIN/cloze-train" $(common "$work/bad") --set train.steps=4 --set train.ckpt_every=2 \
  --set train.keep_last=3
# (a fresh run there is refused before config.cfg is written)
if "$BIN/cloze-train" $(common "$work/bad") --set train.steps=9 2> "$work/refused.log"; then
  fail "a fresh run in a directory with checkpoints exited 0"
fi
grep -q "already holds 2 checkpoint(s).*--start-fresh" "$work/refused.log" || { cat "$work/refused.log"; fail "refusal"; }
grep -Eq "^ *steps = 4L?;" "$work/bad/config.cfg" || fail "a refused fresh run rewrote config.cfg"
for s in 2 4; do truncate -s 100 "$(ck "$work/bad" $s)"; done
if mpi 2 "$BIN/cloze-train" $(common "$work/bad") --set train.steps=6 --resume auto 2> "$work/bad.log"; then
  fail "--resume auto with no readable checkpoint exited 0"
fi
grep -q "none of its 2 checkpoint(s) is readable (ckpt-00000004.lz4, ckpt-00000002.lz4" "$work/bad.log" &&
  grep -q -- "--start-fresh" "$work/bad.log" || { cat "$work/bad.log"; fail "message"; }
for s in 2 4; do [ "$(stat -c %s "$(ck "$work/bad" $s)")" = 100 ] || fail "ckpt $s changed"; done
mpi 2 "$BIN/cloze-train" $(common "$work/bad") --set train.steps=4 --start-fresh 2> "$work/fresh.log" ||
  { cat "$work/fresh.log"; fail "--start-fresh"; }
echo "resume auto with no readable checkpoint: ok"

# 3. pruning after resuming past a corrupt newest checkpoint keeps the new
# one (keep_last = 1 counted only good files), keeps the corrupt one,
# removes the partial file of a dead writer and leaves a live pid's alone
mpi 2 "$BIN/cloze-train" $(common "$work/prune") --set train.steps=6 --set train.ckpt_every=2 \
  --set train.keep_last=2
$PY - "$(ck "$work/prune" 6)" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0xFF; open(p, "wb").write(b)
PY
sleep 0 & dead=$!; wait $dead
echo partial > "$(ck "$work/prune" 7).tmp.$dead"
echo partial > "$(ck "$work/prune" 8).tmp.$$"
mpi 2 "$BIN/cloze-train" $(common "$work/prune") --set train.steps=100 --set train.ckpt_every=2 \
  --set train.keep_last=1 --set train.stop_after_steps=1 --resume auto 2> "$work/prune.log" ||
  { cat "$work/prune.log"; fail "resume past a corrupt checkpoint"; }
grep -q "resumed from $(ck "$work/prune" 4)" "$work/prune.log" || { cat "$work/prune.log"; fail "resumed from?"; }
"$BIN/cloze-ckpt" verify "$(ck "$work/prune" 5)" >/dev/null 2>&1 || fail "pruning deleted the newest good checkpoint"
[ -e "$(ck "$work/prune" 6)" ] || fail "the corrupt checkpoint was removed"
[ ! -e "$(ck "$work/prune" 4)" ] || fail "ckpt 4 kept: keep_last = 1 counts good ones only"
[ ! -e "$(ck "$work/prune" 7).tmp.$dead" ] || fail "a dead writer's partial file was left"
[ -e "$(ck "$work/prune" 8).tmp.$$" ] || fail "a live pid's partial file was removed"
# 6: the resumed run is marked in metrics.jsonl, before its first step
$PY - "$work/prune/metrics.jsonl" <<'PY' || fail "no resumed record before the resumed run's first step"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
at = [i for i, r in enumerate(recs) if r.get("resumed")]
assert len(at) == 1 and recs[at[0]]["step"] == 4, f"resumed records: {[recs[i] for i in at]}"
assert recs[at[0] + 1]["step"] == 5 and "loss" in recs[at[0] + 1], recs[at[0] + 1]
PY
echo "pruning: ok"

# 4. item 6: a config error on every rank is one line, no MPI_ABORT banner,
# and so is an argument error;
# a missing file names its errno; an exploding loss is warned about
if mpi 2 "$BIN/cloze-train" $(common "$work/cfg") --set model.heads=3 > "$work/cfg.out" 2>&1; then
  fail "a bad config exited 0"
fi
[ "$(grep -c "cloze-train: error" "$work/cfg.out")" = 1 ] || { cat "$work/cfg.out"; fail "not one error line"; }
! grep -q "MPI_ABORT" "$work/cfg.out" || { cat "$work/cfg.out"; fail "MPI_ABORT banner"; }
# an argument error, found before MPI_Init, is said by rank 0 alone (every
# rank said it before), and so is cloze-finetune's
if mpi 3 "$BIN/cloze-train" $(common "$work/arg") --no-such-option > "$work/arg.out" 2>&1; then
  fail "an unknown option exited 0"
fi
[ "$(grep -c "unknown option '--no-such-option'" "$work/arg.out")" = 1 ] ||
  { cat "$work/arg.out"; fail "an argument error not said once"; }
if mpi 3 "$BIN/cloze-finetune" run --no-such-option > "$work/ftarg.out" 2>&1; then
  fail "cloze-finetune: an unknown option exited 0"
fi
[ "$(grep -c "unknown option --no-such-option" "$work/ftarg.out")" = 1 ] ||
  { cat "$work/ftarg.out"; fail "cloze-finetune: an argument error not said once"; }
if "$BIN/cloze-train" "$work/no-such.cfg" 2> "$work/missing.log"; then fail "missing config exited 0"; fi
grep -q "no-such.cfg: cannot open: No such file or directory" "$work/missing.log" ||
  { cat "$work/missing.log"; fail "missing config message"; }
mpi 2 "$BIN/cloze-train" $(common "$work/lr") --set train.steps=12 --set optim.lr=10 \
  --set train.max_bad_steps=100 2> "$work/lr.log" || true
grep -q "rose from the average.s minimum [0-9.e+-]* (step [0-9]*): the run is diverging" "$work/lr.log" || { cat "$work/lr.log"; fail "no warning for an exploding loss"; }
echo "small ones: ok"
[ $failures = 0 ] || exit 1
echo "test_train_rundir: ok"
