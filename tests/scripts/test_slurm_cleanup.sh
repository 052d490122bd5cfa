#!/usr/bin/env bash
# slurm_stop (tests/scripts/slurm_lib.sh) leaves nothing behind: with a job
# running (its batch shell and a sleep under slurmstepd), stopping the
# one-node Slurm kills the job, slurmstepd and the daemons. Checked to fail
# with the daemons stopped alone: slurmstepd, the batch shell and the sleep
# kept running with Slurm gone (what a failed test_sweep_slurm left).
set -euo pipefail
source "$(dirname "$0")/slurm_lib.sh"
for tool in slurmctld slurmd munged sbatch; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
work=$(mktemp -d /tmp/cloze-slurm-cleanup-XXXXXX)
chmod 755 "$work"   # munged needs every directory above its socket searchable
cleanup() { local rc=$?; slurm_stop || true; rm -rf "$work"; exit $rc; }
trap cleanup EXIT
slurm_start "$work/slurm" || exit 1
job=$(sbatch --parsable --ntasks=1 --output="$work/job.out" --wrap "echo started; exec sleep 600")
for _ in $(seq 300); do grep -q started "$work/job.out" 2>/dev/null && break; sleep 0.2; done
grep -q started "$work/job.out" || { echo "FAIL: job $job never started"; exit 1; }
before=$(slurm_procs)
echo "the cluster's processes with job $job running: $(for p in $before; do
  echo -n "$(cat /proc/$p/comm 2>/dev/null) "; done)"
grep -qw slurmstepd <<<"$(for p in $before; do cat /proc/$p/comm 2>/dev/null; done)" ||
  { echo "FAIL: no slurmstepd seen for the running job (the check would prove nothing)"; exit 1; }
slurm_stop || { echo "FAIL: slurm_stop left processes behind"; exit 1; }
left=$(slurm_procs)
[ -z "$left" ] || { echo "FAIL: alive after slurm_stop: $left"; ps -o pid,comm,args -p "${left// /,}"; exit 1; }
B=""   # stopped: the trap has nothing left to do
echo "test_slurm_cleanup: ok"
