#!/usr/bin/env bash
# Gradient sync overlapped with backward, in real training: BERT-base on
# 2 ranks x 1 thread (synthetic shards, BERT's vocabulary size, seq 128,
# max_pred 20, micro-batch 4 per rank, global batch 8, 25 MiB buckets,
# dist.placement = $PLACEMENT, default sharded), one run per build and
# round, builds alternated. Prints per build the medians over steps 3..STEPS of the step
# time and of comm_wait_seconds (what the step still waited for the
# gradient sync after backward) from metrics.jsonl.
#
# usage: bench/overlap_bench.sh STEPS ROUNDS DIR [DIR...]
#   DIR  a directory holding cloze-train (a build directory, or a copy of
#        an older build's binary to compare against)
#   PLACEMENT=replicated bench/overlap_bench.sh ...: another placement
# Run it alone on the machine (the timed runs take the cores).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:?usage: overlap_bench.sh STEPS ROUNDS DIR [DIR...]}
rounds=${2:?usage: overlap_bench.sh STEPS ROUNDS DIR [DIR...]}
shift 2
placement=${PLACEMENT:-sharded}
work=$(mktemp -d /tmp/cloze-overlap-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gen=$(find "$@" -maxdepth 2 -name bench-make_synthetic_shards -type f | sed -n 1p)
[ -n "$gen" ] || { echo "overlap_bench: no bench-make_synthetic_shards under $*" >&2; exit 2; }
mkdir -p "$work/data"
"$gen" "$work/data" --tokens 400000 >/dev/null
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; placement $placement; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq 1 "$rounds"); do
  i=0
  for dir in "$@"; do
    i=$((i + 1))
    run=$work/b$i-r$round
    mpirun --oversubscribe -np 2 "$dir/cloze-train" "$here/conf/bert-base.cfg" \
      --set data.train_manifest="$work/data/train.manifest" --set train.run_dir="$run" \
      --set train.steps="$steps" --set train.global_batch=8 --set train.micro_batch=4 \
      --set train.threads=1 --set train.ckpt_every=0 --set train.eval_every=0 \
      --set train.peak_gflops=100 --set data.seq=128 --set data.max_pred=20 \
      --set data.phase2_fraction=0 --set optim.warmup_steps=0 --set optim.warmup_fraction=0.1 \
      --set dist.placement="$placement" \
      --quiet 2> "$run.log" || { cat "$run.log" >&2; exit 1; }
    rm -f "$run"/ckpt-*.lz4
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work" "$rounds" "$@" <<'PY'
import json, statistics, sys
work, rounds, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| build | step s (median) | comm wait s (median) | optimizer s (median) | steps |")
print("|---|---|---|---|---|")
for i, d in enumerate(dirs, 1):
    recs = []
    for r in range(1, rounds + 1):
        lines = [json.loads(l) for l in open(f"{work}/b{i}-r{r}/metrics.jsonl")]
        recs += [x for x in lines if "step_seconds" in x][2:]
    med = lambda k: statistics.median(x[k] for x in recs)
    print(f"| {d} | {med('step_seconds'):.3f} | {med('comm_wait_seconds'):.3f} | "
          f"{med('optim_seconds'):.3f} | {len(recs)} |")
PY
