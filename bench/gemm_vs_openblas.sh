#!/usr/bin/env bash
# Side-by-side GEMM throughput: BLIS's own kernel choice, cloze's CPUID choice
# (cz_gemm, AUTO), BLIS's AVX-512 skx kernels forced (CZ_GEMM_AVX512) and
# OpenBLAS, on the BERT-base shapes of bench/gemm_bench.c.
# BLIS fixes its configuration per process, so the three choices run as
# separate processes, alternated; OpenBLAS runs inside both, alternated with
# BLIS per measurement. Prints a markdown table of medians.
#
# Usage: bench/gemm_vs_openblas.sh [build-dir] [processes-per-choice]
#   env ROUNDS (rounds inside a process, default 2), MIN_TIME (s, default 0.2)
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
      --rounds "${ROUNDS:-2}" --min-time "${MIN_TIME:-0.2}" 2>/dev/null >>"$out"
  done
done

python3 - "$out" <<'PY'
import collections, statistics, sys
samples = collections.defaultdict(list)
order, paths = [], []
for line in open(sys.argv[1]):
    if not line.startswith("sample\t"):
        continue
    _, path, shape, threads, gf = line.rstrip("\n").split("\t")
    key = (shape, int(threads))
    if key not in order:
        order.append(key)
    if path not in paths:
        paths.append(path)
    samples[(path, key)].append(float(gf))
def kind(p):  # columns: BLIS default, cloze AUTO, skx forced, OpenBLAS
    for i, prefix in enumerate(("blis-default", "cloze-auto", "cloze-avx512")):
        if p.startswith(prefix):
            return i
    return 3
paths.sort(key=kind)
ob = [p for p in paths if kind(p) == 3][0]
cz = [p for p in paths if kind(p) == 1][0]
print("| shape (m x n x k) | threads | " + " | ".join(paths) + " | auto / OpenBLAS |")
print("|---|---|" + "---|" * len(paths) + "---|")
for key in sorted(order, key=lambda k: (k[1], order.index(k))):
    med = {p: statistics.median(samples[(p, key)]) for p in paths if samples[(p, key)]}
    cells = " | ".join("%.0f (n=%d)" % (med[p], len(samples[(p, key)])) if p in med else "-"
                       for p in paths)
    print("| %s | %d | %s | %.2f |" % (key[0], key[1], cells, med[cz] / med[ob]))
PY
