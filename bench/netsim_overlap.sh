#!/usr/bin/env bash
# netsim_overlap.sh: how much of the gradient all-reduce backward hides, and
# what bf16 gradients on the wire save, on a simulated cluster
# (launch/cloze-netsim; needs root).
#
#   bench/netsim_overlap.sh BUILD_DIR [options] CASE...
#     CASE                  CONFIG:MICRO:STEPS:SETTINGS, e.g.
#                           bert-mini:8:8:overlap=false  (conf/CONFIG.cfg,
#                           micro-batch per rank, steps, then dist.KEY=VALUE
#                           pairs joined by ',': overlap, grad_wire,
#                           bucket_mb, allreduce, placement, calibrate)
#     --hosts H             simulated hosts (default 4), --ranks-per-host R (1)
#     --rate RATE           each link direction (default 250mbit)
#     --seq S               (default 128)
#     --manifest FILE       shards (default: as bench/netsim_train.sh)
#     --time-limit S        each run is stopped after S s (default 900)
#
# One cluster for all cases; per case one training run. Columns (medians
# over steps 3..STEPS of metrics.jsonl): step_s; wait_s = comm_wait_seconds,
# the gradient communication still running after backward (with
# dist.overlap = false: all of it); compute_s = step_s - wait_s; backward_s = the
# last backward (what the all-reduce can run under); MB/step =
# bytes the hosts' links sent during the run (`cloze-netsim stats`, every
# host's egress, start-up and evaluation included) divided by the steps.
# hidden = 1 - wait_s / wait_s of the same CONFIG:MICRO and placement with
# overlap=false (first such case given): the share of the all-reduce behind
# backward.
# Every simulated host shares this machine's cores, so compute is slower
# than on real hosts and varies with other load.
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h | --help) usage; exit 0 ;; esac
BUILD=$(cd "$1" && pwd)
shift
SRC=$(cd "$(dirname "$0")/.." && pwd)
hosts=4 rph=1 rate=250mbit seq=128 manifest="" limit=900 cases=()
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    --time-limit) limit=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "netsim_overlap.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done
[ ${#cases[@]} -ge 1 ] || { echo "netsim_overlap.sh: no CASE given (--help)" >&2; exit 2; }
NETSIM=$SRC/launch/cloze-netsim
source "$(dirname "$0")/netsim_bench.sh"
netsim_bench_begin netsim_overlap.sh overlap ovb
echo "# $hosts hosts x $rph rank(s), star, $rate per link direction, seq $seq, vocabulary $vocab_size"
"$NETSIM" up --hosts "$hosts" --ranks-per-host "$rph" --rate "$rate" --name "$name" \
  --ttl $(((limit + 60) * ${#cases[@]} + 300)) >/dev/null
p=$((hosts * rph))
sent() { "$NETSIM" --name "$name" stats | awk '$1 ~ /^h[0-9]+$/ { s += $3 } END { printf "%.0f\n", s }'; }
: >"$work/rows"
i=0
for c in "${cases[@]}"; do
  i=$((i + 1))
  IFS=: read -r cfg micro steps settings <<<"$c"
  sets=()
  IFS=, read -r -a kv <<<"${settings:-}"
  for x in "${kv[@]}"; do [ -z "$x" ] || sets+=(--set "dist.$x"); done
  run=$work/run-$i
  before=$(sent)
  timeout --kill-after=10 "$limit" "$NETSIM" --name "$name" mpirun -x OMP_NUM_THREADS=1 -x BLIS_NUM_THREADS=1 \
    "$BUILD/cloze-train" "$SRC/conf/$cfg.cfg" --set model.vocab_size="$vocab_size" \
    --set data.train_manifest="$manifest" --set train.run_dir="$run" --set train.steps="$steps" \
    --set train.global_batch=$((micro * p)) --set train.micro_batch="$micro" --set train.threads=1 \
    --set train.ckpt_every=0 --set train.eval_every=0 --set train.peak_gflops=100 --set data.seq="$seq" \
    --set data.max_pred=20 --set data.phase2_fraction=0 --set optim.lr=1e-4 --set optim.warmup_steps=0 \
    --set optim.warmup_fraction=0.1 "${sets[@]}" --quiet 2>"$work/log-$i" || { cat "$work/log-$i" >&2; exit 1; }
  after=$(sent)
  grep -m1 'gradient all-reduce:' "$work/log-$i" | sed 's/^\[[^]]*\] /# /' || true
  echo "$cfg $micro $steps ${settings:-default} $((after - before)) $run/metrics.jsonl" >>"$work/rows"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/rows" <<'PY'
import json, statistics, sys
print("| model | micro-batch | settings | step s | wait s | compute s | backward s | MB/step | hidden |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
off = {}
for cfg, micro, steps, settings, sent, path in (l.split() for l in open(sys.argv[1])):
    recs = [r for r in map(json.loads, open(path)) if "step_seconds" in r][2:]
    step = statistics.median(r["step_seconds"] for r in recs)
    wait = statistics.median(r["comm_wait_seconds"] for r in recs)
    backward = statistics.median(r["backward_seconds"] for r in recs)
    # compared with overlap=false of the same model, micro-batch and placement
    place = [kv for kv in settings.split(",") if kv.startswith("placement=")]
    key = (cfg, micro, place[0] if place else "placement=sharded")
    if "overlap=false" in settings and key not in off:
        off[key] = wait
    hidden = f"{1 - wait / off[key]:.0%}" if key in off and "overlap=false" not in settings else "-"
    mb = int(sent) / int(steps) / 1e6
    print(f"| {cfg} | {micro} | {settings} | {step:.3f} | {wait:.3f} | {step - wait:.3f} | "
          f"{backward:.3f} | {mb:.1f} | {hidden} |")
PY
