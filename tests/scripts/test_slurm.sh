#!/usr/bin/env bash
# launch/cloze.sbatch against a real one-node Slurm (munge + slurmctld +
# slurmd started here): a 2-rank job submitted with sbatch trains and
# checkpoints; a job signalled as on preemption (USR1 to the batch shell)
# checkpoints, requeues itself, and its second run resumes and finishes with
# the same losses as an uninterrupted run.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
source "$(dirname "$0")/slurm_lib.sh"
for tool in slurmctld slurmd munged sbatch; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
work=$(mktemp -d /tmp/cloze-slurm-XXXXXX)
chmod 755 "$work"   # munged needs every directory above its socket searchable
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
ok=0
# keep the logs of a failed run for the person reading the test output
cleanup() { local rc=$?; slurm_stop; if [ $ok = 1 ]; then rm -rf "$work"; else echo "kept $work"; fi; exit $rc; }
trap cleanup EXIT
slurm_start "$work/slurm" || exit 1

args() { tiny_args "$data" "$1"; echo --set train.global_batch=4 --set train.micro_batch=2 \
  --set train.ckpt_every=5 --set train.steps=$2 --set train.stop_after_steps=${3:-0}; }

# 1. a plain job
job=$(sbatch --parsable --ntasks=2 --cpus-per-task=1 --output="$work/plain.out" \
  --chdir="$SRC" --export=ALL,CLOZE_TRAIN="$BIN/cloze-train" \
  "$SRC/launch/cloze.sbatch" $(args "$work/plain" 12))
state=$(slurm_wait "$job")
[ "$state" = COMPLETED ] || { echo "FAIL: job $job ended $state"; cat "$work/plain.out"; exit 1; }
grep -q "finished with exit 0" "$work/plain.out" || { cat "$work/plain.out"; exit 1; }
[ -f "$work/plain/ckpt-00000012.lz4" ] || { echo "FAIL: no final checkpoint"; exit 1; }

# 2. preemption: USR1 to the batch shell -> checkpoint -> requeue -> resume.
# Each invocation runs at most 2000 steps of a 100000-step schedule, so the
# signal (1 s in) always lands mid-run and the resumed run ends soon.
job=$(sbatch --parsable --ntasks=2 --cpus-per-task=1 --output="$work/pre.out" \
  --chdir="$SRC" --export=ALL,CLOZE_TRAIN="$BIN/cloze-train" \
  "$SRC/launch/cloze.sbatch" $(args "$work/pre" 100000 2000))
for _ in $(seq 600); do [ -s "$work/pre/metrics.jsonl" ] && break; sleep 0.1; done
sleep 1
scancel --signal=USR1 --batch "$job"
# the job requeues itself; it may start again once its old credential has
# expired (cred_expire=5 in slurm_lib.sh)
for _ in $(seq 300); do
  grep -q "requeueing job" "$work/pre.out" 2>/dev/null && break; sleep 0.2
done
grep -q "requeueing job" "$work/pre.out" || { echo "FAIL: no requeue"; cat "$work/pre.out"; exit 1; }
state=$(slurm_wait "$job")
[ "$state" = COMPLETED ] || { echo "FAIL: requeued job ended $state"; cat "$work/pre.out"; exit 1; }
grep -Eq "restart [1-9][0-9]*:" "$work/pre.out" || { echo "FAIL: job did not run a second time"; cat "$work/pre.out"; exit 1; }
# the reference: uninterrupted to the same final step
final=$(tail -n1 "$work/pre/metrics.jsonl" | $PY -c 'import json,sys; print(json.load(sys.stdin)["step"])')
mpi 2 "$BIN/cloze-train" $(args "$work/ref" 100000 "$final")
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/ref/metrics.jsonl" "$work/pre/metrics.jsonl" --exact
ok=1
echo "test_slurm: ok"
