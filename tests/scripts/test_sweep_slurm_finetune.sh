#!/usr/bin/env bash
# Fine-tuning per point on Slurm: cloze-sweep submit of the 1 x 2 sweep of
# test_sweep_finetune (sweep_common.sh's ft_spec: tiny BERTs, the two-class
# TSV task, here 1 learning rate x 6 restarts) against a real one-node Slurm
# (tests/scripts/slurm_lib.sh). Checked:
#  - each array task fine-tunes its own point after pre-training (the task's
#    log says so, its finetune/tsv/state.json is done and every restart's run
#    is there) and the report job fine-tunes nothing;
#  - the results.csv the report job writes is identical, timing columns
#    aside (so ft_tsv, ft_tsv_std, ft_tsv_n included), to a local
#    `cloze-sweep run` of the same spec;
#  - SIGUSR1 to point 0's array task while it fine-tunes (as Slurm sends it
#    before a time limit or on preemption; here scancel --batch, once the
#    grid's first two runs have finished): the run under way checkpoints and
#    stops, the task requeues itself and runs again, without pre-training
#    again; the grid resumes rather than starts over (each run started from
#    step 0 once, the finished ones kept, the stopped one continued from the
#    checkpoint the signal made), and every run's dev predictions (logits)
#    are the local sweep's to the last digit;
#  - submitting again after a point's fine-tuning was lost submits that
#    point (pre-trained, not fine-tuned: not done), whose task fine-tunes it
#    without pre-training again, to the same results.
set -euo pipefail
source "$(dirname "$0")/sweep_common.sh"
source "$(dirname "$0")/slurm_lib.sh"
for tool in slurmctld slurmd munged sbatch; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
work=$(mktemp -d /tmp/cloze-sweep-slurm-ft-XXXXXX)
chmod 755 "$work"   # munged needs every directory above its socket searchable
ok=0
cleanup() { local rc=$?; slurm_stop; if [ $ok = 1 ]; then rm -rf "$work"; else echo "kept $work"; fi; exit $rc; }
trap cleanup EXIT
S=$work/sw
B=$work/slurm   # slurm_start sets it too; slurm_stop in cleanup needs it before
fail() { echo "FAIL: $*"; for f in "$S"/slurm/*.out; do echo "== $f"; cat "$f" || true; done; exit 1; }

ft_task "$work/task"
# 6 restarts (not test_sweep_finetune's 2): the signal, sent once two have
# finished, reaches the grid well before it ends (on the 2-vCPU Zen 4 it
# stopped the third run at its first step, with three more to go)
RESTARTS=6
ft_spec "$work/ft.cfg" "$work/task" "1e-3" "" $RESTARTS
SPEC=$work/ft.cfg
"$SWEEP" run "$SPEC" --dir "$work/local" "${SWEEP_ARGS[@]}" --quiet >"$work/local.log" 2>&1 ||
  { cat "$work/local.log"; fail "the local sweep"; }
slurm_start "$work/slurm" || exit 1

# submit_wait NAME: cloze-sweep submit (sweep_common.sh's sweep_submit: the
# ids in $array and $report), then waits for the report job
submit_wait() {
  sweep_submit "$work/$1.txt" "$SPEC" --dir "$S" "${SWEEP_ARGS[@]}" --max-parallel 1 || fail "$1"
  wait_report "$1"
}
wait_report() {
  local state
  state=$(slurm_wait "$report")
  [ "$state" = COMPLETED ] || fail "$1: report job $report ended $state"
  grep -q "fine-tuning" "$S"/slurm/report-"$report".out && fail "the report job fine-tuned"
  return 0
}

# ft_ran POINT INDEX: the array task of point INDEX fine-tuned it in full
ft_ran() {
  local out=$S/slurm/task-${array}_$2.out d=$S/points/$1/finetune/tsv s
  [ -f "$out" ] || fail "no log of array task $2"
  grep -q "fine-tuning tsv: starting, $RESTARTS cloze-finetune run(s)" "$out" &&
    grep -q "fine-tuning tsv: dev accuracy .* ($RESTARTS restarts" "$out" ||
    fail "array task $2 did not fine-tune $1"
  grep -q '"status":"done"' "$d/state.json" || fail "$1: tsv not done"
  for s in $(seq $RESTARTS); do
    grep -q '"final"' "$d/lr0.001-b8-e6-s$s/results.jsonl" || fail "$1: restart $s did not run"
  done
}

# ft_resumed GRID_DIR: the grid's cloze-finetune calls (its finetune.log)
# are one stopped by the signal (the run under way wrote a checkpoint at
# step N and stopped, then the grid) and one that resumed it: that run from
# step N, the runs finished before it kept; each of the $RESTARTS runs started
# from scratch exactly once
ft_resumed() {
  $PY - "$1" "$RESTARTS" <<'PY'
import glob, re, sys
d, restarts = sys.argv[1], int(sys.argv[2])
log = open(d + "/finetune.log", encoding="utf-8").read().splitlines()
def lines(text):
    return [i for i, l in enumerate(log) if text in l]
stop = lines("stop requested by signal: checkpoint at step")
assert len(stop) == 1, "%d runs stopped by a signal, not 1" % len(stop)
step = int(re.search(r"at step (\d+)", log[stop[0]]).group(1))
grid_stop = lines("grid stopped at point ")
assert len(grid_stop) == 1 and grid_stop[0] > stop[0], "the grid did not stop after the run"
stopped = re.search(r"grid stopped at point (\S+);", log[grid_stop[0]]).group(1)
resumed = lines("resumed from ")
assert len(resumed) == 1, "%d runs resumed, not 1" % len(resumed)
want = "resumed from %s/ckpt-%08d.lz4: step %d," % (stopped, step, step)
assert want in log[resumed[0]], "%s, not %s" % (log[resumed[0]], want)
runs = sorted(glob.glob(d + "/lr*"))
assert len(runs) == restarts, runs
before = set()
for r in runs:
    fresh = lines("no checkpoint in %s, starting fresh" % r)
    assert len(fresh) == 1, "%s started from scratch %d times" % (r, len(fresh))
    if fresh[0] < stop[0]:
        before.add(r)
assert stopped in before, "the stopped run %s did not start before the signal" % stopped
kept = {re.search(r"grid point \d+/\d+ (\S+): done before", log[i]).group(1)
        for i in lines(": done before (")}
assert kept == before - {stopped}, "kept %s, finished before the signal %s" % (kept, before - {stopped})
print("%s: stopped at step %d of %s, resumed there; kept %d finished run(s)"
      % (d, step, stopped[len(d) + 1:], len(kept)))
PY
}

# ft_columns SWEEP_DIR: each row's ft_tsv and ft_tsv_std are the mean and
# sample std of its restarts' dev scores as their results.jsonl record them,
# to the 6 decimals of grid.jsonl: figures of the records alone, which a
# resumed grid shares with an uninterrupted one (the grid once took a
# restart kept from an interrupted call as recorded but one it ran in the
# same call at full precision, and the two differed in the last digit)
ft_columns() {
  $PY - "$1" <<'PY'
import csv, glob, json, math, sys
d = sys.argv[1]
for row in csv.DictReader(open(d + "/results.csv", newline="")):
    runs = sorted(glob.glob("%s/points/%s/finetune/tsv/lr*/results.jsonl" % (d, row["name"])))
    s = [[json.loads(l) for l in open(f) if '"final"' in l][-1]["score"] for f in runs]
    mean = sum(s) / len(s)
    sd = math.sqrt(sum((x - mean) * (x - mean) for x in s) / (len(s) - 1))
    for col, want in (("ft_tsv", mean), ("ft_tsv_std", sd)):
        assert float(row[col]) == float("%.6f" % want), "%s: %s %s, not %.6f" % (row["name"], col, row[col], want)
PY
}

# ---- the first submit, and SIGUSR1 to point 0's task while it fine-tunes
names=($(csv_column "$work/local/results.csv" name))
sweep_submit "$work/submit1.txt" "$SPEC" --dir "$S" "${SWEEP_ARGS[@]}" --max-parallel 1 || fail submit1
grep -q "(2 task(s): points 0-1," "$work/submit1.txt" || fail "not both points submitted"
d0=$S/points/${names[0]}/finetune/tsv
# well under way: the grid's second run has finished (its final checkpoint
# and dev score are written; kept by the resumed grid, they must count as
# they would have in one uninterrupted call), the third has begun
r2=$d0/lr0.001-b8-e6-s2
for _ in $(seq 3000); do
  grep -qs '"final"' "$r2/results.jsonl" && break
  sleep 0.02
done
grep -qs '"final"' "$r2/results.jsonl" || fail "point 0's second fine-tuning run never finished"
[ -e "$d0/state.json" ] && fail "point 0's fine-tuning ended before the signal"
# scancel exits non-zero for an array task id although it signals the task
# (Slurm 22.05); the assertions below check that the signal arrived
scancel --signal=USR1 --batch "${array}_0" || echo "scancel exited $? (the task is checked below)"
slurm_rerun_wait "${array}_0" || fail "point 0's task was not requeued"
wait_report submit1
out0=$S/slurm/task-${array}_0.out
for line in "fine-tuning tsv: interrupted (checkpointed)" "requeueing job [0-9]* to resume the fine-tuning" \
  "point 0 ${names[0]} (job [0-9]*, restart [1-9][0-9]*)" "pre-trained already" \
  "fine-tuning tsv: resuming, $RESTARTS cloze-finetune run(s)"; do
  grep -q "$line" "$out0" || fail "point 0's task log lacks '$line'"
done
[ "$(grep -c '' "$S/points/${names[0]}/attempts.jsonl")" = 1 ] || fail "point 0 was pre-trained again"
ft_resumed "$d0" || fail "point 0's fine-tuning did not resume where the signal stopped it"
names=($(csv_column "$S/results.csv" name))
[ ${#names[@]} = 2 ] || fail "results.csv has ${#names[@]} rows"
for i in 0 1; do ft_ran "${names[$i]}" $i; done
# every run's final model, to the last digit of its dev logits
for f in "$work"/local/points/*/finetune/tsv/lr*/dev_predictions.jsonl; do
  cmp -s "$f" "$S/${f#"$work/local/"}" || fail "${f#"$work/local/"} differs from the local sweep's"
done
[ "$(csv_column "$S/results.csv" ft_tsv_n | sort -u)" = $RESTARTS ] || fail "ft_tsv_n is not the $RESTARTS restarts"
ft_columns "$work/local" && ft_columns "$S" || fail "the ft columns are not the restarts' mean and std"
$PY "$SRC/tests/scripts/compare_results.py" "$work/local/results.csv" "$S/results.csv" \
  --ignore "$TIMING" --rows 2 || fail "Slurm and local results differ"

# ---- point 1's fine-tuning lost: a second submit fine-tunes it again
rm -r "$S/points/${names[1]}/finetune"
submit_wait submit2
grep -q "(1 task(s): points 1," "$work/submit2.txt" || fail "the second submit did not submit point 1 alone"
grep -q "pre-trained already" "$S/slurm/task-${array}_1.out" || fail "point 1 was pre-trained again"
ft_ran "${names[1]}" 1
$PY "$SRC/tests/scripts/compare_results.py" "$work/local/results.csv" "$S/results.csv" \
  --ignore "$TIMING" --rows 2 || fail "the second submit's results differ"
ok=1
echo "test_sweep_slurm_finetune: ok"
