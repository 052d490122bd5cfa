#!/usr/bin/env bash
# Per-shape fp32 GEMM table: cloze's cz_gemm with BLIS's kernel forced per
# process (BLIS_ARCH_TYPE: skx = AVX-512 32x12, haswell = AVX2 6x16, zen3,
# ...), OpenBLAS, and PyTorch's torch.matmul on the same shapes (the
# products of one BERT-mini or BERT-base micro-batch, bench-gemm_bench).
#
# BLIS fixes its configuration once per process, so each kernel runs in a
# process of its own (bench-gemm_bench --choice auto: cloze's per-shape path,
# on the forced configuration; the column says which configuration ran, as
# cz_gemm_describe reports it, so a refused request cannot pass for another
# kernel); OpenBLAS is measured inside each, alternated with BLIS per
# measurement. PyTorch runs bench/torch_matmul_bench.py on the shapes those
# processes printed. Processes alternate per repetition, each under the
# machine-wide lock. Prints a markdown table of medians (GFLOP/s).
#
# usage: bench/gemm_kernels_vs_torch.sh BUILD_DIR
#   env MODEL (mini|base, default mini), KERNELS (default "cpuid skx zen3
#   haswell": cpuid = cloze's CPUID choice; a BLIS 0.9.0 configuration name
#   forces it; those this CPU cannot run are left out. BLIS 0.9.0, Debian
#   12's, has no zen4 or zen5 configuration: zen3 is its newest AMD one),
#   THREADS (default 1,2), ROUNDS (rounds inside a process, default 2),
#   MIN_TIME (s per measurement, default 0.2), REPS (processes per kernel,
#   default 1), QUICK=1 (every third shape), DECODER=1 (add the MLM
#   decoder's products), TORCH_PYTHONS (interpreters with torch, default
#   BUILD_DIR/torch-venv/bin/python (PyPI's, as bench/e2e_vs_torch.sh
#   makes it) and /usr/bin/python3 (Debian's 1.13), those present),
#   LOCK (default /tmp/cloze-cpu.lock), BF16=1 (issue 33's bf16 table:
#   cloze's bf16 kernel (bench-gemm_bench --bf16, alternated with fp32 in
#   the same process; BF16_KERNEL: auto (core's choice, default),
#   vdpbf16ps, amx) beside cloze's fp32 and PyTorch's bf16 torch.matmul
#   (oneDNN) instead of its fp32; KERNELS then defaults to cpuid).
set -euo pipefail
build=$(cd "${1:?usage: bench/gemm_kernels_vs_torch.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
bench=$build/bench/bench-gemm_bench
[ -x "$bench" ] || { echo "$bench: not built" >&2; exit 1; }
LOCK=${LOCK:-/tmp/cloze-cpu.lock}
source "$(dirname "$0")/blis_arch.sh"
if [ "${BF16:-0}" = 1 ]; then blis_kernels ${KERNELS:-cpuid}; else blis_kernels ${KERNELS:-cpuid skx zen3 haswell}; fi
pythons=()
for py in ${TORCH_PYTHONS:-$build/torch-venv/bin/python /usr/bin/python3}; do
  [ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null && pythons+=("$py") ||
    echo "note: $py: no torch there, left out" >&2
done
args=(--threads "${THREADS:-1,2}" --rounds "${ROUNDS:-2}" --min-time "${MIN_TIME:-0.2}"
      --model "${MODEL:-mini}")
[ "${QUICK:-0}" = 1 ] && args+=(--quick)
[ "${DECODER:-0}" = 1 ] && args+=(--decoder)
if [ "${BF16:-0}" = 1 ]; then # measured in the same process, alternated with fp32
  args+=(--bf16); [ "${BF16_KERNEL:-auto}" = auto ] || args+=(--bf16-kernel "$BF16_KERNEL")
fi
out=$(mktemp /tmp/cloze-gemm-kernels.XXXXXX)
trap 'rm -f "$out" "$out.torch"' EXIT
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'); $(date -u '+%F %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
exec 9>>"$LOCK"
for rep in $(seq "${REPS:-1}"); do
  flock 9
  for k in "${kernels[@]}"; do
    # OpenBLAS picks its AVX-512 kernels from CPUID only when these are unset
    forced=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u BLIS_ARCH_TYPE)
    [ "$k" = cpuid ] || forced+=(BLIS_ARCH_TYPE="$(blis_arch_number "$k")")
    "${forced[@]}" "$bench" "${args[@]}" 2>/dev/null 9>&- |
      tee -a "$out" | grep '^# cloze path' >&2 || { echo "$bench failed for kernel $k" >&2; exit 1; }
  done
  for py in "${pythons[@]}"; do
    tag=torch; [ "$py" = /usr/bin/python3 ] && tag=torch-debian
    OMP_WAIT_POLICY=PASSIVE "$py" "$here/torch_matmul_bench.py" "$out" --name "$tag" \
      --threads "${THREADS:-1,2}" --rounds "${ROUNDS:-2}" --min-time "${MIN_TIME:-0.2}" \
      --dtype "$([ "${BF16:-0}" = 1 ] && echo bf16 || echo fp32)" 9>&- \
      >"$out.torch" || { echo "$py torch_matmul_bench.py failed" >&2; exit 1; }
    grep '^#' "$out.torch" >&2
    cat "$out.torch" >>"$out"
  done
  flock -u 9
done
echo "end: $(date -u '+%H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import collections, statistics, sys
gf = collections.defaultdict(list)
order, paths = [], []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) != 5 or f[0] != "sample":
        continue
    key = (f[2], int(f[3]))
    if key not in order:
        order.append(key)
    if f[1] not in paths:
        paths.append(f[1])
    gf[(f[1], key)].append(float(f[4]))
# columns: cloze on each BLIS configuration, then OpenBLAS, then PyTorch
rank = lambda p: (0 if p.startswith(("cloze", "blis")) else 1 if p.startswith("openblas") else 2)
paths.sort(key=rank)
best = [p for p in paths if rank(p) == 2]
print("GFLOP/s, median over samples (samples per cell in the last line); "
      "cloze-auto:blis-X = cz_gemm's per-shape path on BLIS configuration X")
print()
print("| shape | threads | " + " | ".join(paths) + (" | best cloze / best PyTorch |" if best else " |"))
print("|---|---|" + "---|" * (len(paths) + (1 if best else 0)))
for key in sorted(order, key=lambda k: (k[1], order.index(k))):
    cell = {p: statistics.median(gf[(p, key)]) for p in paths if gf[(p, key)]}
    row = [f"{cell[p]:.0f}" if p in cell else "-" for p in paths]
    if best:
        c = max((v for p, v in cell.items() if rank(p) == 0), default=None)
        t = max((v for p, v in cell.items() if rank(p) == 2), default=None)
        row.append(f"{c / t:.2f}" if c and t else "-")
    print(f"| {key[0]} | {key[1]} | " + " | ".join(row) + " |")
print()
print("samples per cell: " + ", ".join(
    f"{p} {max(len(v) for (q, _), v in gf.items() if q == p)}" for p in paths))
PY
