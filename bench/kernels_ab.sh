#!/usr/bin/env bash
# Kernels one by one (bench-kernels_bench) from several builds and kernel
# paths side by side: every variant once per round, rounds alternated, all in
# one hold of the machine-wide lock; prints per kernel the median over rounds
# of each variant's figure (itself a median of --reps calls) and its ratio
# to the first variant.
#
# usage: bench/kernels_ab.sh NAME=BUILD_DIR[:PATH] ... [-- bench args]
#   PATH is a CLOZE_KERNELS value (scalar|baseline|avx2|avx512; none: the
#   widest the CPU has). Bench args default to "--threads 1 --reps 9".
#   env ROUNDS (default 5), LOCK (default /tmp/cloze-cpu.lock; LOCK=none
#   when the caller already holds it, e.g. under flock /tmp/cloze-cpu.lock).
# example: old build against new on the AVX-512 and AVX2 copies:
#   bench/kernels_ab.sh old512=/tmp/old/build:avx512 new512=build:avx512 \
#     old2=/tmp/old/build:avx2 new2=build:avx2 -- --threads 1 --reps 9
set -euo pipefail
variants=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do variants+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
args=("$@"); [ ${#args[@]} -gt 0 ] || args=(--threads 1 --reps 9)
[ ${#variants[@]} -gt 0 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
ROUNDS=${ROUNDS:-5}
LOCK=${LOCK:-/tmp/cloze-cpu.lock}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run_rounds() {
  for round in $(seq "$ROUNDS"); do
    for v in "${variants[@]}"; do
      name=${v%%=*} rest=${v#*=}
      dir=${rest%%:*} kern=
      [[ $rest == *:* ]] && kern=${rest#*:}
      env ${kern:+CLOZE_KERNELS=$kern} "$dir/bench/bench-kernels_bench" "${args[@]}" 9>&- |
        sed -n 's/^\(.*[^ ]\) \+\([0-9.]\+\) ms$/\1\t\2/p' | sed "s/^/$name\t$round\t/" >>"$out"
    done
  done
}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'); $(date -u '+%F %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg); bench args: ${args[*]}; $ROUNDS rounds"
if [ "$LOCK" = none ]; then run_rounds; else
  exec 9>>"$LOCK"; flock 9; run_rounds; flock -u 9
fi
echo "done $(date -u '+%H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "${variants[@]%%=*}" <<'EOF'
import statistics, sys
from collections import defaultdict
names = sys.argv[2:]
t = defaultdict(list)
kernels = []
for line in open(sys.argv[1]):
    name, _, kernel, ms = line.rstrip("\n").split("\t")
    t[(kernel, name)].append(float(ms))
    if kernel not in kernels: kernels.append(kernel)
print("| kernel (ms per call, median of rounds) | " + " | ".join(names) + " | " +
      " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |")
print("|---" * (2 * len(names)) + "|")
for k in kernels:
    m = [statistics.median(t[(k, n)]) if t[(k, n)] else float("nan") for n in names]
    print(f"| {k} | " + " | ".join(f"{x:.3f}" for x in m) + " | " +
          " | ".join(f"{x / m[0]:.2f}" for x in m[1:]) + " |")
EOF
