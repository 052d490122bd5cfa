# Shared by the tests of Slurm on a simulated cluster (launch/cloze-netsim
# slurm): skips (77) where namespaces cannot be made or Slurm is not
# installed; brings up HOSTS simulated hosts with one slurmd each (the
# cluster, its Slurm and $work removed on exit; $work kept when the test
# fails). Slurm's ports and files live inside this cluster's namespaces and
# state directory, so it cannot meet the one-node Slurm of slurm_lib.sh.
# usage: NAME_PREFIX=slm HOSTS=4 source slurm_netsim_common.sh
for tool in slurmctld slurmd munged sbatch srun nsenter; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
source "$(dirname "${BASH_SOURCE[0]}")/netsim_common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/slurm_lib.sh"
chmod 755 "$work"   # the jobs write their logs here
ok=0
cleanup() {
  local rc=$?
  if [ "$ok" != 1 ] && [ -d "${CLOZE_NETSIM_STATE:-/tmp}/cloze-netsim.$name/slurm/log" ]; then
    sl scontrol show job >"$work/jobs.txt" 2>&1 || true
    sl sinfo -N >"$work/sinfo.txt" 2>&1 || true
    cp -r "${CLOZE_NETSIM_STATE:-/tmp}/cloze-netsim.$name/slurm/log" "$work/slurm-log" 2>/dev/null || true
  fi
  "$NETSIM" --name "$name" down >/dev/null 2>&1 || true
  if [ "$ok" = 1 ]; then rm -rf "$work"; else echo "kept $work"; fi
  exit $rc
}
trap cleanup EXIT
# the cluster removes itself after 10 minutes whatever happens to this script
"$NETSIM" up --hosts "${HOSTS:?}" --ranks-per-host 2 --rate 10gbit --name "$name" --ttl 600 >/dev/null
if ! "$NETSIM" --name "$name" slurm up --slurmd-timeout 30 2>"$work/slurm-up.log"; then
  cat "$work/slurm-up.log"
  echo "SKIP: the Slurm daemons did not start on the simulated hosts"
  exit 77
fi
# Slurm's commands, run on host 0 (slurmctld is reached at its 198.18 address)
sl() { "$NETSIM" --name "$name" exec 0 "$@"; }
slurm_cmd() { sl "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
# sub OUT SBATCH-OPTIONS... -- ARGS: launch/cloze.sbatch as a user submits
# it; the job id. Every simulated host shares this machine's cores: ranks
# unbound, yielding while they wait; TCP on the simulated network only.
sub() {
  local out=$1; shift
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  sl sbatch --parsable --output="$out" --chdir="$SRC" "${opts[@]}" \
    --export=ALL,CLOZE_TRAIN="$BIN/cloze-train",CLOZE_NETWORK=198.18.0.0/15,OMPI_MCA_hwloc_base_binding_policy=none \
    "$SRC/launch/cloze.sbatch" "$@"
}
