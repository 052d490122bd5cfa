#!/usr/bin/env bash
# netsim_train.sh: weak scaling of pre-training on simulated clusters
# (launch/cloze-netsim): the same per-rank work (micro-batch, seq) on 1, 2,
# 4, ... hosts, the step time and the communication wait measured, and the
# gradient's all-reduce timed alone on the same cluster; then what the
# alpha-beta model says for clusters that are not here.
#
#   bench/netsim_train.sh BUILD_DIR [options]
#     --hosts "1 2 4 8"     host counts (default)
#     --ranks-per-host R    (default 1)
#     --rate RATE           each link direction (default 1gbit)
#     --config FILE         model (default conf/bert-mini.cfg)
#     --micro B             micro-batch per rank (default 8), seq --seq (128)
#     --steps S             steps per run (default 8; medians over steps 3..S)
#     --allreduce A         dist.allreduce (default auto)
#     --model-hosts "64 512"  modelled clusters (calibration of the largest run)
#     --manifest FILE       shards (default: BERT's vocabulary over
#                           ../shared/data's WikiText-2 + Gutenberg, else the
#                           python3.11-doc corpus with a learned vocabulary)
#     --time-limit S        each training run is stopped after S s (default 300)
#
# Columns: hosts, ranks, step_s and comm_wait_s (medians over steps 3..S,
# from metrics.jsonl), compute_s = step_s - comm_wait_s, allreduce_s (the
# whole gradient, bench-allreduce_bench --floats, median of 3), and two
# efficiencies against 1 host (see docs/distributed-log.md, "End to end on a simulated cluster"):
#   eff_wait = 1 - comm_wait_s / step_s      (share of the step not waiting)
#   eff_serial = compute_1 / (compute_1 + allreduce_s)   (no overlap at all)
# Needs root (network namespaces). Every simulated host shares this
# machine's cores, so compute_s grows with the rank count here; a real host
# would keep it at compute_1.
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h | --help) usage; exit 0 ;; esac
BUILD=$(cd "$1" && pwd)
shift
SRC=$(cd "$(dirname "$0")/.." && pwd)
hosts_list="1 2 4 8" rph=1 rate=1gbit config=$SRC/conf/bert-mini.cfg micro=8 seq=128 steps=8
allreduce=auto model_hosts="64 512" manifest="" limit=300
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts_list=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --allreduce) allreduce=$2; shift 2 ;;
    --model-hosts) model_hosts=$2; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    --time-limit) limit=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "netsim_train.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
NETSIM=$SRC/launch/cloze-netsim
BENCH=$BUILD/bench/bench-allreduce_bench
[ -x "$BENCH" ] || { echo "netsim_train.sh: $BENCH is missing (build the benches)" >&2; exit 2; }
source "$(dirname "$0")/netsim_bench.sh"
netsim_bench_begin netsim_train.sh train czw
gbit=$(echo "$rate" | sed -n 's/gbit$//p')
gbit=${gbit:-1}
echo "# $(basename "$config"), micro-batch $micro x seq $seq per rank, $steps steps, dist.allreduce=$allreduce, $rph rank(s) per host, star, $rate per link direction"
: >"$work/rows"
for h in $hosts_list; do
  "$NETSIM" up --hosts "$h" --ranks-per-host "$rph" --rate "$rate" --name "$name" --ttl $((limit + 300)) >/dev/null
  p=$((h * rph))
  run=$work/run-$h
  timeout --kill-after=10 "$limit" "$NETSIM" --name "$name" mpirun -x OMP_NUM_THREADS=1 -x BLIS_NUM_THREADS=1 \
    "$BUILD/cloze-train" "$config" --set model.vocab_size="$vocab_size" --set data.train_manifest="$manifest" \
    --set train.run_dir="$run" --set train.steps="$steps" --set train.global_batch=$((micro * p)) \
    --set train.micro_batch="$micro" --set train.threads=1 --set train.ckpt_every=0 --set train.eval_every=0 \
    --set train.peak_gflops=100 --set data.seq="$seq" --set data.max_pred=20 --set data.phase2_fraction=0 \
    --set optim.lr=1e-4 \
    --set optim.warmup_steps=0 --set optim.warmup_fraction=0.1 --set dist.allreduce="$allreduce" \
    --set dist.link_gbit="$gbit" --quiet 2>"$work/log-$h" || { cat "$work/log-$h" >&2; exit 1; }
  # sed -n 1p, not head: a reader that stops early can fail the pipeline (pipefail)
  floats=$(sed -n 's/.*[^0-9.]\([0-9.]*\)M parameters.*/\1/p' "$work/log-$h" | sed -n 1p)
  floats=$(awk -v m="$floats" 'BEGIN { printf "%.0f\n", m * 1e6 }')
  picked=$(sed -n 's/.*gradient all-reduce: \([a-z0-9]*\).*/\1/p' "$work/log-$h" | sed -n 1p)
  ar=""
  if [ "$p" -gt 1 ]; then
    timeout --kill-after=10 "$limit" "$NETSIM" --name "$name" mpirun "$BENCH" --floats "$floats" --reps 3 \
      --algos "${picked:-ring}" >"$work/bench-$h" 2>&1 || { cat "$work/bench-$h" >&2; exit 1; }
    ar=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ { print $2 / 1000; exit }' "$work/bench-$h")
    grep '^calibration between' "$work/bench-$h" >"$work/calib" || true
  fi
  echo "$h $p ${picked:-none} ${ar:-0} $run/metrics.jsonl" >>"$work/rows"
  "$NETSIM" --name "$name" down >/dev/null 2>&1
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# the model, calibrated on the largest cluster run (alpha and the per-link
# rate with every host sending)
: >"$work/model"
if [ -s "$work/calib" ]; then
  sed 's/^/# /' "$work/calib"
  alpha=$(sed -n 's/.*alpha \([0-9.]*\) us.*/\1/p' "$work/calib")
  link=$(sed -n 's/.* \([0-9.]*\) Gbit\/s per host link.*/\1/p' "$work/calib")
  for H in $model_hosts; do
    "$BENCH" --model "${H}x$rph" --floats "$floats" --net "$alpha,$link" >"$work/model-$H" 2>&1 ||
      { cat "$work/model-$H" >&2; exit 1; }
    awk -v H="$H" -v p=$((H * rph)) '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ {
      a = $6; t = a ~ /^torus2d/ ? $4 : a == "hierarchical" ? $3 : $2
      print H, p, a, t / 1000 }' "$work/model-$H" >>"$work/model"
  done
  echo "# model: alpha $alpha us, $link Gbit/s per host link (calibrated on the largest run above)"
fi
python3 - "$work/rows" "$work/model" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("| hosts | ranks | all-reduce | step s | comm wait s | compute s | gradient all-reduce s | eff_wait | eff_serial |")
print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
c1 = None
for h, p, algo, ar, path in rows:
    recs = [json.loads(l) for l in open(path)]
    steps = [r for r in recs if "step_seconds" in r][2:]
    step = statistics.median(r["step_seconds"] for r in steps)
    wait = statistics.median(r["comm_wait_seconds"] for r in steps)
    comp = step - wait
    if c1 is None:
        c1 = comp
    ar = float(ar)
    print(f"| {h} | {p} | {algo} | {step:.3f} | {wait:.3f} | {comp:.3f} | {ar:.3f} | "
          f"{1 - wait / step:.2f} | {c1 / (c1 + ar):.2f} |")
for h, p, algo, ar in (l.split() for l in open(sys.argv[2])):
    ar = float(ar)
    print(f"| {h} (modelled) | {p} | {algo} | - | - | {c1:.3f} (1 host's) | {ar:.3f} (model) | - | "
          f"{c1 / (c1 + ar):.2f} |")
PY
