#!/usr/bin/env bash
# netsim_allreduce.sh: the all-reduce algorithms on a simulated cluster
# (launch/cloze-netsim), side by side in one run: our ring, hierarchical and
# torus2d against MPI_Allreduce with Open MPI's defaults and with its ring
# and Rabenseifner algorithms forced (bench-allreduce_bench's columns).
#
#   bench/netsim_allreduce.sh BUILD_DIR [options]
#     --hosts N             simulated hosts (default 4)
#     --ranks-per-host R    ranks on each host, sharing its memory (default 2)
#     --rate RATE           each link direction, tc tbf (default 1gbit)
#     --topology T          star (default) or torus XxY (hosts on a 2-D torus)
#     --min-mib M --max-mib X --factor F   message sizes M, M*F, ... X MiB
#                           (default 1, 64, 4)
#     --reps R              repetitions per size, interleaved (default 3)
#     --time-limit S        the benchmark is stopped after S seconds (default 600)
#     --algos LIST          passed to the bench (default: all that apply)
#     --mca NAME VALUE      an Open MPI parameter for the run (repeatable);
#                           it applies to every algorithm, Open MPI's too
#     --env NAME=VALUE      an environment variable for every rank (repeatable)
#
# Needs root (network namespaces). Prints the machine (CPU model, cores, load
# average), the cluster, the bench's table, and the bytes each shaped link
# carried. The cluster is removed on exit, and after --time-limit + 120 s
# whatever happens (its own watchdog). Run it alone on the machine: timings
# of a machine shared with other jobs are noise.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h | --help) usage; exit 0 ;; esac
BUILD=$(cd "$1" && pwd)
shift
hosts=4 rph=2 rate=1gbit topo=(--topology star) topo_desc=star min=1 max=64 factor=4 reps=3 limit=600 algos=()
bench_topo=() mpi_extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --topology)
      if [ "$2" = torus ]; then topo=(--topology torus "$3"); topo_desc="torus $3"; bench_topo=(--topology "$3"); shift 3
      else topo=(--topology "$2"); topo_desc=$2; shift 2; fi ;;
    --min-mib) min=$2; shift 2 ;;
    --max-mib) max=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --time-limit) limit=$2; shift 2 ;;
    --algos) algos=(--algos "$2"); shift 2 ;;
    --mca) mpi_extra+=(--mca "$2" "$3"); shift 3 ;;
    --env) mpi_extra+=(-x "$2"); shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "netsim_allreduce.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
[[ $limit =~ ^[0-9]+$ ]] || { echo "netsim_allreduce.sh: --time-limit: seconds" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
NETSIM=$SRC/launch/cloze-netsim
BENCH=$BUILD/bench/bench-allreduce_bench
[ -x "$BENCH" ] || { echo "netsim_allreduce.sh: $BENCH is missing (build the benches)" >&2; exit 2; }
if ! why=$("$NETSIM" check); then echo "netsim_allreduce.sh: $why" >&2; exit 2; fi

hyp=$(lscpu | sed -n 's/^Hypervisor vendor: *//p')
name="czb$$"
name=${name:0:8}
trap '"$NETSIM" --name "$name" down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), cloze $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?')"
cpu() { lscpu | sed -n "s/^$1: *//p" | sed -n 1p; }
echo "# CPU: $(cpu 'Model name') (family $(cpu 'CPU family') model $(cpu Model)$(grep -qw avx512f /proc/cpuinfo && echo ', AVX-512')${hyp:+, $hyp guest}), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cluster: $hosts hosts x $rph ranks, $topo_desc, $rate per link direction"
"$NETSIM" up --hosts "$hosts" --ranks-per-host "$rph" --rate "$rate" "${topo[@]}" --name "$name" \
  --ttl $((limit + 120)) >/dev/null
[ ${#mpi_extra[@]} -eq 0 ] || echo "# mpirun ${mpi_extra[*]}"
echo "# bench-allreduce_bench $max --min-mib $min --factor $factor --reps $reps --no-overlap ${algos[*]} ${bench_topo[*]}"
rc=0
timeout --kill-after=10 "$limit" "$NETSIM" --name "$name" mpirun \
  --mca coll_tuned_use_dynamic_rules 1 -x OMP_NUM_THREADS=1 -x BLIS_NUM_THREADS=1 "${mpi_extra[@]}" \
  "$BENCH" "$max" --min-mib "$min" --factor "$factor" --reps "$reps" --no-overlap \
  "${algos[@]}" "${bench_topo[@]}" || rc=$?
[ $rc -ne 124 ] || echo "netsim_allreduce.sh: stopped after --time-limit $limit s" >&2
echo "# bytes sent per shaped link during the run:"
"$NETSIM" --name "$name" stats | sed 's/^/#   /'
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
