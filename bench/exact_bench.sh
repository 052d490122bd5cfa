#!/usr/bin/env bash
# What dist.exact costs: the same BERT run on RANKS ranks (1 thread per rank,
# sharded placement, overlap on) with fp32 sums and with exact sums, REPS
# repetitions each, alternating. MODEL=mini (default): conf/bert-mini.cfg,
# seq 128, max_pred 20, global batch 32 = micro-batch 8 x 4. MODEL=base:
# conf/bert-base.cfg (110M parameters), seq 128, max_pred 20, global batch
# 4 = micro-batch 1 x 4, one phase: the smallest batch that still gives each
# of 2 ranks two micro-batches, so that a step on one core of a 2-core
# machine stays a few seconds of compute. Prints per run the median step
# over the steps after the first two (exact mode's first step is its
# discovery pass), then the median of the runs per mode, their ratio, the
# bytes each rank sends per step (counted from the algorithms: ring
# reduce-scatter of fp32 n(p-1)/p x 4 and the weights' all-gather
# n(p-1)/p x 4, against the int64 all-reduce 2n(p-1)/p x 8 and the same
# all-gather), and cloze-plan's prediction of both steps from the first
# fp32 run's metrics.jsonl and network.txt. On simulated hosts it also
# prints the bytes the hosts' links carried (cloze-netsim stats: every
# host's egress over the whole run, start-up and the first step included,
# divided by hosts and steps; TCP/IP headers included).
#
# usage: bench/exact_bench.sh BUILD_DIR [RANKS] [REPS] [STEPS] [TRAIN_MANIFEST]
#   TRAIN_MANIFEST  shards (default: bench_corpus.sh's)
#   MODEL=base (environment): BERT-base as above (default mini)
#   NETSIM_RATE=250mbit (environment): RANKS simulated hosts of one rank
#                   each on launch/cloze-netsim, links of that rate (root)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:?usage: exact_bench.sh BUILD_DIR [RANKS] [REPS] [STEPS] [TRAIN_MANIFEST]}" && pwd)
ranks=${2:-2}
reps=${3:-3}
steps=${4:-8}
manifest=${5:-}
work=$(mktemp -d /tmp/cloze-exact-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
source "$(dirname "$0")/bench_corpus.sh"
[ -n "$manifest" ] || manifest=$(bench_corpus "$bin" "$here" "$work")
vocab_size=$(awk '$1 == "vocab" { print $3 }' "$manifest")
case ${MODEL:-mini} in
  mini) cfg=$here/conf/bert-mini.cfg batch=32 micro=8 ;;
  base) cfg=$here/conf/bert-base.cfg batch=4 micro=1 ;;
  *) echo "exact_bench.sh: MODEL must be mini or base, not '$MODEL'" >&2; exit 2 ;;
esac
sets=(--set model.vocab_size=$vocab_size --set data.train_manifest="$manifest"
  --set train.steps=$steps --set train.global_batch=$batch --set train.micro_batch=$micro
  --set data.phase2_fraction=0
  --set train.threads=1 --set train.ckpt_every=0 --set train.eval_every=0
  --set train.peak_gflops=100 --set data.seq=128 --set data.max_pred=20 --set optim.lr=1e-3
  --set optim.warmup_steps=0 --set optim.warmup_fraction=0.1 --set dist.placement=sharded
  --set dist.overlap=true)
launch=(mpirun -np "$ranks")
if [ -n "${NETSIM_RATE:-}" ]; then
  name=czx$$
  "$here/launch/cloze-netsim" up --hosts "$ranks" --ranks-per-host 1 --rate "$NETSIM_RATE" \
    --name "$name" --ttl 3600 >/dev/null
  trap '"$here/launch/cloze-netsim" --name "$name" down >/dev/null 2>&1; rm -rf "$work"' EXIT
  launch=("$here/launch/cloze-netsim" --name "$name" mpirun -x OMP_NUM_THREADS=1 -x BLIS_NUM_THREADS=1)
fi
# every simulated host's egress so far, in bytes (the hosts' side of their links)
wire_bytes() {
  "$here/launch/cloze-netsim" --name "$name" stats | awk '$1 ~ /^h[0-9]+$/ { s += $3 } END { printf "%.0f\n", s }'
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; MODEL=${MODEL:-mini}, $ranks ranks, $reps reps, $steps steps${NETSIM_RATE:+, $ranks simulated hosts at $NETSIM_RATE}" >&2
for rep in $(seq 1 "$reps"); do
  for exact in false true; do
    run=$work/$exact-$rep
    [ -z "${NETSIM_RATE:-}" ] || b0=$(wire_bytes)
    "${launch[@]}" "$bin/cloze-train" "$cfg" "${sets[@]}" \
      --set train.run_dir="$run" --set dist.exact=$exact --quiet 2> "$run.log" ||
      { cat "$run.log" >&2; exit 1; }
    [ -z "${NETSIM_RATE:-}" ] || echo $(($(wire_bytes) - b0)) > "$run.wire"
    echo "  run $rep exact=$exact done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    grep -o '[0-9.]*M parameters' "$run.log" | sed -n 1p > "$work/params"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
plan_hosts=1 plan_rph=$ranks
[ -z "${NETSIM_RATE:-}" ] || plan_hosts=$ranks plan_rph=1
"$bin/cloze-plan" "$cfg" "${sets[@]}" --hosts "$plan_hosts" \
  --ranks-per-host "$plan_rph" \
  --cluster-file "$work/false-1/network.txt" --compute-from "$work/false-1/metrics.jsonl" \
  --json > "$work/plan.json"
python3 - "$work" "$reps" "$ranks" "$steps" <<'PY'
import json, os, statistics, sys
work, reps, p, nsteps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
n = float(open(f"{work}/params").read().split("M")[0]) * 1e6
med = {}
print("| mode | run | step s (median of steps 3..) | comm wait s | compute s |")
print("|---|---|---:|---:|---:|")
for exact in ("false", "true"):
    med[exact] = []
    for rep in range(1, reps + 1):
        recs = [json.loads(l) for l in open(f"{work}/{exact}-{rep}/metrics.jsonl")]
        steps = [r for r in recs if "step_seconds" in r][2:]
        m = lambda k: statistics.median(r[k] for r in steps)
        med[exact].append(m("step_seconds"))
        name = "exact" if exact == "true" else "fp32"
        print(f"| {name} | {rep} | {m('step_seconds'):.3f} | {m('comm_wait_seconds'):.4f} | "
              f"{m('compute_seconds'):.3f} |")
f32, ex = statistics.median(med["false"]), statistics.median(med["true"])
gather = n * (p - 1) / p * 4
b32 = n * (p - 1) / p * 4 + gather
bex = 2 * n * (p - 1) / p * 8 + gather
plan = json.loads(open(f"{work}/plan.json").read().splitlines()[0])
print()
print(f"| | fp32 sums | exact sums | exact / fp32 |")
print(f"|---|---:|---:|---:|")
print(f"| step s, median of {reps} runs | {f32:.3f} | {ex:.3f} | {ex / f32:.3f} |")
print(f"| cloze-plan's step s | {plan['default_step']:.3f} | {plan['exact_step']:.3f} | "
      f"{plan['exact_step'] / plan['default_step']:.3f} |")
print(f"| MB sent per rank per step ({n / 1e6:.2f}M floats, {p} ranks) | {b32 / 1e6:.1f} | "
      f"{bex / 1e6:.1f} | {bex / b32:.2f} |")
if os.path.exists(f"{work}/false-1.wire"):
    wire = {e: statistics.median(int(open(f"{work}/{e}-{r}.wire").read()) / p / nsteps
                                 for r in range(1, reps + 1)) for e in ("false", "true")}
    print(f"| MB on each host's link per step (whole run / {nsteps} steps, median) | "
          f"{wire['false'] / 1e6:.1f} | {wire['true'] / 1e6:.1f} | {wire['true'] / wire['false']:.2f} |")
PY
