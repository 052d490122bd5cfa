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

# Preemption of task 1 in the middle of its point, whatever the CPU's speed:
# the point must not end before the signal reaches its ranks (on a fast CPU
# the tiny point finished between two looks at its checkpoints). So the
# ranks are held (SIGSTOP) from the moment they appear, and let run in short
# slices until they catch SIGUSR1 and have written a checkpoint; then the
# batch shell is signalled, and the ranks go on once the signal is pending
# in both: each step waits for an event, none for a duration.
d=$work/sw/points/C4e10_L1_H64
ranks=()
# point_ranks: the cloze-train processes of task 1's point
point_ranks() {
  local p
  for p in $(pgrep -x cloze-train); do
    { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -qF " $d/point.cfg " && echo "$p"
  done
  return 0
}
# sig_bit PID FIELD: whether SIGUSR1 is set in that /proc/PID/status mask
sig_bit() {
  local m
  m=$(awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null)
  [ -n "$m" ] && (((16#$m >> 9) & 1))
}
hold() { kill -STOP "${ranks[@]}" 2>/dev/null || true; }
resume() { kill -CONT "${ranks[@]}" 2>/dev/null || true; }
for _ in $(seq 6000); do
  mapfile -t ranks < <(point_ranks)
  hold
  [ ${#ranks[@]} -ge 2 ] && break
  [ ! -e "$d/state.json" ] || fail "task 1 ended before its ranks were seen"
  sleep 0.01
done
[ ${#ranks[@]} = 2 ] || fail "task 1's 2 ranks never ran (found: ${ranks[*]:-none})"
ready=0
for _ in $(seq 20000); do
  if sig_bit "${ranks[0]}" SigCgt && sig_bit "${ranks[1]}" SigCgt && ls "$d"/ckpt-*.lz4 >/dev/null 2>&1; then
    ready=1
    break
  fi
  kill -0 "${ranks[@]}" 2>/dev/null || fail "task 1's ranks ended while held"
  resume
  sleep 0.01
  hold
done
[ $ready = 1 ] || fail "task 1's ranks never caught SIGUSR1 and checkpointed"
[ ! -e "$d/state.json" ] || fail "task 1 ended while held"
echo "task 1 held at: $(ls "$d"/ckpt-*.lz4 | xargs -n1 basename | tr '\n' ' ')"
# The signal goes to the batch shell (the cloze-sweep task the array script
# execs) as slurmstepd sends it on preemption, by kill on this one-node
# cluster: `scancel --signal=USR1 --batch` of Slurm 22.05 answers "Job is in
# transitional state, retrying" and signals again 5 s later and on, which
# reached the requeued task too and interrupted it a second time.
jid=$(squeue -h -o %A -j "${array}_1")
[ -n "$jid" ] || fail "no job id for task ${array}_1"
shell=""
for p in $(pgrep -x cloze-sweep); do
  grep -qzx "SLURM_JOB_ID=$jid" "/proc/$p/environ" 2>/dev/null && shell=$p
done
[ -n "$shell" ] || fail "no batch shell (cloze-sweep task) of job $jid"
kill -USR1 "$shell"
pending=0
for _ in $(seq 3000); do
  if { sig_bit "${ranks[0]}" ShdPnd || sig_bit "${ranks[0]}" SigPnd; } &&
     { sig_bit "${ranks[1]}" ShdPnd || sig_bit "${ranks[1]}" SigPnd; }; then
    pending=1
    break
  fi
  sleep 0.02
done
resume
[ $pending = 1 ] || fail "SIGUSR1 did not reach task 1's ranks within 60 s"
slurm_rerun_wait "${array}_1" || fail "task 1 was not requeued"
state=$(slurm_wait "$report")
[ "$state" = COMPLETED ] || fail "report job $report ended $state"
[ "$(grep -c '"outcome":"interrupted"' "$d/attempts.jsonl")" = 1 ] ||
  fail "task 1 was not interrupted once: $(cat "$d/attempts.jsonl")"
[ "$(grep -c '"outcome":"done"' "$d/attempts.jsonl")" = 1 ] || fail "task 1 did not finish after its requeue"
grep -q "requeueing job" "$d/train.log" || fail "task 1 did not requeue itself"
out1=$(ls "$work"/sw/slurm/task-"${array}"_1.out)
grep -Eq "restart [1-9][0-9]*" "$out1" || fail "task 1 did not run a second time"
$PY "$SRC/tests/scripts/compare_results.py" "$ref/results.csv" "$work/sw/results.csv" --ignore "$TIMING" --rows 4
[ -s "$work/sw/report/report.md" ] && [ -s "$work/sw/report/loss_vs_params.png" ] ||
  fail "the report job wrote no report"
ok=1
echo "test_sweep_slurm: ok"
