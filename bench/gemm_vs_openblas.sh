#!/usr/bin/env bash
# Side-by-side GEMM throughput: BLIS's own kernel choice, cloze's CPUID choice
# (cz_gemm, AUTO), BLIS's AVX-512 skx kernels forced (CZ_GEMM_AVX512) and
# OpenBLAS, on the BERT-base shapes of bench/gemm_bench.c.
# BLIS fixes its configuration per process, so the three choices run as
# separate processes, alternated; OpenBLAS runs inside both, alternated with
# BLIS per measurement. Prints a markdown table of medians.
#
# Usage: bench/gemm_vs_openblas.sh [build-dir] [processes-per-choice]
#   env ROUNDS (rounds inside a process, default 2), MIN_TIME (s, default 0.2),
#   THREADS (thread counts, default 1,2)
set -euo pipefail
build=${1:-build}
reps=${2:-2}
bench="$build/bench/bench-gemm_bench"
[ -x "$bench" ] || { echo "$bench: not built" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# OpenBLAS picks its AVX-512 kernels from CPUID only when these are unset.
for r in $(seq "$reps"); do
  for choice in default auto avx512; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bench" --choice "$choice" \
      --threads "${THREADS:-1,2}" --rounds "${ROUNDS:-2}" --min-time "${MIN_TIME:-0.2}" \
      2>/dev/null >>"$out"
  done
done

python3 - "$out" <<'PY'
# Load from other processes drifts over a run, so each BLIS figure is also
# compared with the OpenBLAS measurement made right before or after it in the
# same process (paired ratio); the table gives medians of both.
import collections, statistics, sys
gf = collections.defaultdict(list)
ratio = collections.defaultdict(list)
order, paths, pending = [], [], None
for line in open(sys.argv[1]):
    if not line.startswith("sample\t"):
        continue
    _, path, shape, threads, value = line.rstrip("\n").split("\t")
    key, value = (shape, int(threads)), float(value)
    if key not in order:
        order.append(key)
    if path not in paths:
        paths.append(path)
    gf[(path, key)].append(value)
    if pending and pending[1] == key:  # second of a pair
        (p0, _, v0), (p1, v1) = pending, (path, value)
        blis, ob = ((p0, v0), v1) if p1.startswith("openblas") else ((p1, v1), v0)
        ratio[(blis[0], key)].append(blis[1] / ob)
        pending = None
    else:
        pending = (path, key, value)
def kind(p):  # columns: BLIS default, cloze AUTO, skx forced, OpenBLAS
    for i, prefix in enumerate(("blis-default", "cloze-auto", "cloze-avx512")):
        if p.startswith(prefix):
            return i
    return 3
paths.sort(key=kind)
print("GFLOP/s, median over samples; in brackets: median of paired ratios to OpenBLAS")
print()
print("| shape | threads | " + " | ".join(paths) + " |")
print("|---|---|" + "---|" * len(paths))
for key in sorted(order, key=lambda k: (k[1], order.index(k))):
    cells = []
    for p in paths:
        if not gf[(p, key)]:
            cells.append("-")
        elif ratio[(p, key)]:
            cells.append("%.0f (%.2f)" % (statistics.median(gf[(p, key)]),
                                          statistics.median(ratio[(p, key)])))
        else:
            cells.append("%.0f" % statistics.median(gf[(p, key)]))
    print("| %s | %d | %s |" % (key[0], key[1], " | ".join(cells)))
n = {p: max(len(v) for (q, _), v in gf.items() if q == p) for p in paths}
print()
print("samples per cell: " + ", ".join("%s %d" % (p, n[p]) for p in paths))
PY
