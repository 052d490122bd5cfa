#!/usr/bin/env bash
# Side-by-side GEMM throughput: BLIS's own kernel choice, cloze's CPUID choice
# (cz_gemm, AUTO), BLIS's AVX-512 skx kernels forced (CZ_GEMM_AVX512) and
# OpenBLAS, on the BERT-base (or BERT-mini) shapes of bench/gemm_bench.c.
# BLIS fixes its configuration per process, so the three choices run as
# separate processes, alternated; OpenBLAS runs inside both, alternated with
# BLIS per measurement. Prints a markdown table of medians.
#
# Usage: bench/gemm_vs_openblas.sh [build-dir] [processes-per-choice]
#   env ROUNDS (rounds inside a process, default 2), MIN_TIME (s, default 0.2),
#   THREADS (thread counts, default 1,2), CHOICES (default "default auto
#   avx512"), BF16=1 (add cloze's bf16 mode, "cloze-bf16", to the auto process),
#   MODEL=base|mini (shapes, default base), DECODER=1 (add the MLM decoder's),
#   OPENBLAS_CORE (e.g. Haswell or Zen: OpenBLAS's AVX2 kernels, set as
#   OPENBLAS_CORETYPE, to compare AVX2 kernels with AVX2 kernels on an
#   AVX-512 machine; default unset: OpenBLAS's CPUID choice)
set -euo pipefail
build=${1:-build}
reps=${2:-2}
bench="$build/bench/bench-gemm_bench"
[ -x "$bench" ] || { echo "$bench: not built" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

extra=()
[ -n "${MODEL:-}" ] && extra+=(--model "$MODEL")
[ "${DECODER:-0}" = 1 ] && extra+=(--decoder)
# OpenBLAS picks its AVX-512 kernels from CPUID only when these are unset.
core=(-u OPENBLAS_CORETYPE)
[ -n "${OPENBLAS_CORE:-}" ] && core=(OPENBLAS_CORETYPE="$OPENBLAS_CORE")
echo "OpenBLAS kernels: ${OPENBLAS_CORE:-its CPUID choice}"
for r in $(seq "$reps"); do
  for choice in ${CHOICES:-default auto avx512}; do
    bf16=()
    [ "${BF16:-0}" = 1 ] && [ "$choice" = auto ] && bf16=(--bf16)
    env -u OPENBLAS_L2_SIZE "${core[@]}" "$bench" --choice "$choice" \
      --threads "${THREADS:-1,2}" --rounds "${ROUNDS:-2}" --min-time "${MIN_TIME:-0.2}" \
      "${bf16[@]}" "${extra[@]}" 2>/dev/null >>"$out"
  done
done

python3 - "$out" <<'PY'
# Load from other processes drifts over a run, so each cloze/BLIS figure is
# also compared with the OpenBLAS measurement made right before or after it
# in the same process (paired ratio: the consecutive samples of one shape,
# 2 or with --bf16 3, form a group); the table gives medians of both.
import collections, statistics, sys
gf = collections.defaultdict(list)
ratio = collections.defaultdict(list)
order, paths, group = [], [], []
def close(group):
    ob = [v for p, v in group if p.startswith("openblas")]
    for p, v in group:
        if ob and not p.startswith("openblas"):
            ratio[(p, key_of_group)].append(v / ob[0])
key_of_group = None
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
    if key != key_of_group or any(p == path for p, _ in group):
        close(group)
        group, key_of_group = [], key
    group.append((path, value))
close(group)
def kind(p):  # columns: BLIS default, cloze AUTO, skx forced, cloze bf16, OpenBLAS
    for i, prefix in enumerate(("blis-default", "cloze-auto", "cloze-avx512", "cloze-bf16")):
        if p.startswith(prefix):
            return i
    return 4
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
