#!/usr/bin/env bash
# Optimizer placement x all-reduce on 2 ranks: the same BERT-mini run (seq 128,
# max_pred 20, global batch 32 = 2 ranks x micro 16, 1 thread per rank) for
# each dist.placement and dist.allreduce, then the all-reduce bus bandwidth at
# the size of BERT-mini's gradient. Prints a markdown table of medians over
# the steps after the first two (warm-up).
#
# usage: bench/placement_bench.sh BUILD_DIR [STEPS] [TRAIN_MANIFEST]
#   TRAIN_MANIFEST  shards to train on (default: ../shared/data's WikiText +
#                   Gutenberg with BERT's vocabulary if present, else the
#                   python3.11-doc corpus as launch/default-corpus.sh makes it)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:?usage: placement_bench.sh BUILD_DIR [STEPS] [TRAIN_MANIFEST]}" && pwd)
steps=${2:-20}
manifest=${3:-}
work=$(mktemp -d /tmp/cloze-placement-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$(dirname "$0")/bench_corpus.sh"
[ -n "$manifest" ] || manifest=$(bench_corpus "$bin" "$here" "$work")
vocab_size=$(awk '$1 == "vocab" { print $3 }' "$manifest")
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $steps steps per run" >&2
for ar in ring mpi; do
  for place in coordinator sharded replicated; do
    mpirun --oversubscribe -np 2 "$bin/cloze-train" "$here/conf/bert-mini.cfg" \
      --set model.vocab_size=$vocab_size --set data.train_manifest="$manifest" \
      --set train.run_dir="$work/$place-$ar" --set train.steps=$steps --set train.global_batch=32 \
      --set train.micro_batch=16 --set train.threads=1 --set train.ckpt_every=0 \
      --set train.eval_every=0 --set train.peak_gflops=100 --set data.seq=128 --set data.max_pred=20 \
      --set optim.lr=1e-3 --set optim.warmup_steps=0 --set optim.warmup_fraction=0.1 \
      --set dist.placement=$place --set dist.allreduce=$ar --quiet 2> "$work/$place-$ar.log" \
      || { cat "$work/$place-$ar.log" >&2; exit 1; }
    grep -o '[0-9.]*M parameters' "$work/$place-$ar.log" | sed -n 1p > "$work/params"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
print("| placement | all-reduce | step s (median) | tokens/s | comm wait s | peak RSS MiB (max / mean per rank) |")
print("|---|---|---|---|---|---|")
for ar in ("ring", "mpi"):
    for place in ("coordinator", "sharded", "replicated"):
        recs = [json.loads(l) for l in open(f"{work}/{place}-{ar}/metrics.jsonl")]
        steps = [r for r in recs if "step_seconds" in r][2:]
        rss = [r for r in recs if "peak_rss_mib_max" in r][-1]
        med = lambda k: statistics.median(r[k] for r in steps)
        print(f"| {place} | {ar} | {med('step_seconds'):.3f} | {med('tokens_per_s'):.0f} | "
              f"{med('comm_wait_seconds'):.4f} | {rss['peak_rss_mib_max']:.0f} / {rss['peak_rss_mib_mean']:.0f} |")
PY
floats=$(python3 -c "print(round(float(open('$work/params').read().split('M')[0]) * 1e6))")
echo
echo "all-reduce of BERT-mini's gradient ($floats floats), best of 3:"
mpirun --oversubscribe -np 2 "$bin/bench/bench-allreduce_bench" --floats "$floats"
