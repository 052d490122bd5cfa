#!/usr/bin/env bash
# cloze-sweep submit against a real one-node Slurm (munge + slurmctld +
# slurmd started here, tests/scripts/slurm_lib.sh): the tiny 2 x 2 sweep runs
# as a job array, one task per point, at most one at a time; one task is
# signalled as on preemption (SIGUSR1 to its batch shell) in the middle of
# its point, checkpoints, requeues itself and resumes; the report job that
# depends on the array (afterany) writes results.csv and the report; the
# results are identical, timing columns aside, to the uninterrupted local
# sweep's.
set -euo pipefail
source "$(dirname "$0")/sweep_common.sh"
source "$(dirname "$0")/slurm_lib.sh"
for tool in slurmctld slurmd munged sbatch; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
work=$(mktemp -d /tmp/cloze-sweep-slurm-XXXXXX)
chmod 755 "$work"   # munged needs every directory above its socket searchable
ok=0
cleanup() { local rc=$?; slurm_stop; if [ $ok = 1 ]; then rm -rf "$work"; else echo "kept $work"; fi; exit $rc; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/sw/slurm/*.out; do echo "== $f"; cat "$f" || true; done; exit 1; }
ref=$(reference_sweep)
slurm_start "$work/slurm" || exit 1

sweep_submit "$work/submit.txt" "$SPEC" --dir "$work/sw" "${SWEEP_ARGS[@]}" --max-parallel 1 || fail "submit"
grep -q "at most 1 at a time" "$work/submit.txt" && grep -qx "array $array 0-3" "$work/sw/slurm/jobs.txt" ||
  fail "jobs.txt: $(cat "$work/sw/slurm/jobs.txt")"
grep -q "^#SBATCH --requeue" "$work/sw/slurm/array.sbatch" || fail "the array script does not requeue"

# preemption of task 1 in the middle of its point
d=$work/sw/points/C4e10_L1_H64
for _ in $(seq 1500); do
  if ls "$d"/ckpt-*.lz4 >/dev/null 2>&1 && [ ! -e "$d/state.json" ]; then break; fi
  sleep 0.02
done
ls "$d"/ckpt-*.lz4 >/dev/null 2>&1 || fail "task 1 never got under way"
# scancel exits non-zero for an array task id although it signals the task
# (Slurm 22.05); the assertions below check that the signal arrived
scancel --signal=USR1 --batch "${array}_1" || echo "scancel exited $? (the task is checked below)"
slurm_rerun_wait "${array}_1" || fail "task 1 was not requeued"
state=$(slurm_wait "$report")
[ "$state" = COMPLETED ] || fail "report job $report ended $state"
grep -q '"outcome":"interrupted"' "$d/attempts.jsonl" || fail "task 1 was not interrupted: $(cat "$d/attempts.jsonl")"
[ "$(grep -c '"outcome":"done"' "$d/attempts.jsonl")" = 1 ] || fail "task 1 did not finish after its requeue"
grep -q "requeueing job" "$d/train.log" || fail "task 1 did not requeue itself"
out1=$(ls "$work"/sw/slurm/task-"${array}"_1.out)
grep -Eq "restart [1-9][0-9]*" "$out1" || fail "task 1 did not run a second time"
$PY "$SRC/tests/scripts/compare_results.py" "$ref/results.csv" "$work/sw/results.csv" --ignore "$TIMING" --rows 4
[ -s "$work/sw/report/report.md" ] && [ -s "$work/sw/report/loss_vs_params.png" ] ||
  fail "the report job wrote no report"
ok=1
echo "test_sweep_slurm: ok"
