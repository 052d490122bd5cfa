#!/usr/bin/env bash
# Threads per rank on restricted and shared CPUs: median step time of a
# BERT-mini run (1 rank, micro-batch 8, seq 128, synthetic shards) under
#   pinned   taskset -c 0 (one allowed CPU), the thread count the old code
#            picked (online CPUs = 2) against train.threads=0 (now: 1),
#            each with libgomp's default waiting and with OMP_WAIT_POLICY=PASSIVE;
#   shared   both CPUs allowed, CPU 1 taken by a busy loop of another process:
#            2 threads (what train.threads=0 picks, the mask allows both)
#            default and PASSIVE, against 1 thread;
#   idle     no other process: 2 threads against 1 (the reference).
# Run under the machine-wide CPU lock (flock /tmp/cloze-cpu.lock) so nothing else timed runs.
#   bench/threads_bench.sh BUILD_DIR [STEPS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
steps=${2:-6}
work=$(mktemp -d /tmp/cloze-threads-bench-XXXXXX)
hog=
trap '[ -z "$hog" ] || kill "$hog" 2>/dev/null; rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work/data"
"$build/bench/bench-make_synthetic_shards" "$work/data" --tokens 400000 >/dev/null
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) CPUs online; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
run() { # run NAME THREADS WAIT PREFIX...
  local name=$1 threads=$2 wait=$3; shift 3
  local envs=(env -u OMP_WAIT_POLICY) pass=()
  [ "$wait" = default ] || { envs=(env OMP_WAIT_POLICY="$wait"); pass=(-x OMP_WAIT_POLICY); }
  "$@" "${envs[@]}" mpirun --bind-to none -np 1 "${pass[@]}" "$build/cloze-train" \
    "$here/conf/bert-mini.cfg" --set data.train_manifest="$work/data/train.manifest" \
    --set train.run_dir="$work/$name" --set train.steps="$steps" --set train.global_batch=8 \
    --set train.micro_batch=8 --set train.threads="$threads" --set train.ckpt_every=0 \
    --set train.eval_every=0 --set train.peak_gflops=100 --set train.log_every=1 \
    --set data.phase2_fraction=0 --set optim.warmup_steps=1 --quiet 2> "$work/$name.log" ||
    { cat "$work/$name.log" >&2; exit 1; }
  local picked
  picked=$(sed -n 's/.* x \([0-9]*\) thread(s); gemm.*/\1/p' "$work/$name.log")
  python3 - "$work/$name/metrics.jsonl" "$name" "$threads" "$picked" "$wait" <<'PY'
import json, statistics, sys
path, name, asked, picked, wait = sys.argv[1:]
t = [r["step_seconds"] for r in map(json.loads, open(path)) if "step_seconds" in r][1:]
print(f"| {name} | {asked} | {picked} | {wait} | {statistics.median(t):.3f} | {len(t)} |")
PY
}
echo "| case | train.threads | threads run | OMP_WAIT_POLICY | step s (median) | steps |"
echo "|---|---|---|---|---|---|"
run idle-2 2 default
run idle-1 1 default
run pinned-old-2 2 default taskset -c 0
run pinned-old-2-passive 2 PASSIVE taskset -c 0
run pinned-auto 0 default taskset -c 0
taskset -c 1 bash -c 'while :; do :; done' &
hog=$!
run shared-auto-2 0 default
run shared-2-passive 0 PASSIVE
run shared-1 1 default
kill "$hog"; hog=
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
