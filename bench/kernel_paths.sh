#!/usr/bin/env bash
# One forward + backward step of BERT-mini and BERT-base (bench-model_step_bench)
# on each instruction-set path of the non-GEMM kernels (CLOZE_KERNELS), runs
# alternated, each under the machine-wide lock; prints the median step, the
# seconds outside GEMM and their share of the step per path.
#
# usage: bench/kernel_paths.sh BUILD_DIR [mini|base ...]
#   env REPS (default 3), PATHS (default "avx512 avx2 baseline scalar"; paths
#   the CPU cannot run are left out), THREADS (default 2), OTHER_BUILD (a
#   second build directory, e.g. of an older commit, run beside them as
#   "other"), LOCK (default /tmp/cloze-cpu.lock: held for each repetition,
#   i.e. one run of every path, so the runs compared are timed back to back
#   with no other timed work between them)
# Shapes: mini = L4 H256 A4, T128, batch 32 (bench/e2e_vs_torch.sh's global
# batch on one rank); base = L12 H768 A12, T128, batch 8.
set -euo pipefail
build=$(cd "$1" && pwd); shift
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(mini base)
REPS=${REPS:-3}
THREADS=${THREADS:-2}
LOCK=${LOCK:-/tmp/cloze-cpu.lock}
flags=$(grep -m1 '^flags' /proc/cpuinfo)
paths=()
for p in ${PATHS:-avx512 avx2 baseline scalar}; do
  case $p in
    avx512) [[ $flags == *avx512f* && $flags == *avx512bw* && $flags == *avx512vl* && $flags == *avx512dq* ]] || continue ;;
    avx2) [[ $flags == *avx2* && $flags == *fma* ]] || continue ;;
  esac
  paths+=("$p")
done
[ -n "${OTHER_BUILD:-}" ] && paths+=(other)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'); $(date -u '+%F %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
for model in "${models[@]}"; do
  case $model in
    mini) args=(--layers 4 --hidden 256 --heads 4 --seq 128 --batch 32 --steps 5) ;;
    base) args=(--layers 12 --hidden 768 --heads 12 --seq 128 --batch 8 --steps 3) ;;
    *) echo "kernel_paths: unknown model $model" >&2; exit 2 ;;
  esac
  for rep in $(seq "$REPS"); do
    flock 9
    for p in "${paths[@]}"; do
      exe=$build/bench/bench-model_step_bench kern=$p
      [ "$p" = other ] && exe=$OTHER_BUILD/bench/bench-model_step_bench kern=
      line=$(env ${kern:+CLOZE_KERNELS=$kern} "$exe" --threads "$THREADS" "${args[@]}" 2>/dev/null 9>&- |
        grep -E '^(step median|profile)' | tr '\n' ' ')
      echo "$model $p $line" | tee -a "$out" | cut -c1-160 >&2
    done
    flock -u 9
  done
done 9>>"$LOCK"
python3 - "$out" <<'EOF'
import re, statistics, sys
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    model, path = line.split()[:2]
    step = float(re.search(r"step median ([0-9.]+) s", line).group(1))
    gemm = float(re.search(r"gemm ([0-9.]+) s", line).group(1))
    total = float(re.search(r"total ([0-9.]+) s", line).group(1))
    rows[(model, path)].append((step, total - gemm, (total - gemm) / total))
print("| model | path | step (median) | outside GEMM per step | share of the step | runs |")
print("|---|---|---|---|---|---|")
for (model, path), rs in rows.items():
    m = lambda i: statistics.median(r[i] for r in rs)
    print(f"| {model} | {path} | {m(0):.3f} s | {m(1):.4f} s | {100 * m(2):.1f}% | {len(rs)} |")
EOF
