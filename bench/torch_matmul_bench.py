#!/usr/bin/env python3
"""PyTorch's torch.matmul on the matrix-product shapes of bench-gemm_bench,
for the per-shape table of bench/gemm_kernels_vs_torch.sh; fp32, or bf16
(--dtype bf16: bf16 operands and result, as under torch.autocast; PyPI's
x86 builds run these through oneDNN, on AMX where the CPU has it).

usage: torch_matmul_bench.py SHAPES_FILE [--threads 1,2] [--rounds 2]
       [--min-time 0.2] [--name torch] [--dtype fp32|bf16]

SHAPES_FILE holds bench-gemm_bench's "sample" lines (any path); each
distinct shape among them, "NAME TT MxNxK" or "NAME TT MxNxK xBATCH", is
measured here, so the two programs never disagree on the shapes. T in the
first (second) place: A (B) is stored transposed and passed to torch.matmul
as a transposed view, which PyTorch hands to its BLAS as a transpose flag,
as cz_gemm gets it. A shape with a batch (attention: one product per
sequence and head) runs as one batched torch.matmul over [BATCH, rows,
cols] tensors, the way an eager BERT's attention calls it; bench-gemm_bench
runs those on head slices of [tokens x d] buffers instead.

Prints, in bench-gemm_bench's format, one line per measurement:
"sample <name>-<torch version> <shape> <threads> <GFLOP/s>", and on the
first line (as a comment) the BLAS PyTorch was built with (BLAS_INFO: mkl
for PyPI's x86 wheels; "generic" for Debian's 1.13, which calls the
system's libblas.so.3, an alternatives link to OpenBLAS or BLIS)."""
import argparse
import re
import time

import torch

SHAPE = re.compile(r"^(?P<name>.*) (?P<ta>[NT])(?P<tb>[NT]) (?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)"
                   r"(?: x(?P<batch>\d+))?$")


def shapes_of(path):
    seen = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 5 and f[0] == "sample" and SHAPE.match(f[2]):
            seen.setdefault(f[2], SHAPE.match(f[2]))
    return seen


def operands(s, dtype):
    m, n, k = int(s["m"]), int(s["n"]), int(s["k"])
    lead = (int(s["batch"]),) if s["batch"] else ()
    g = torch.Generator().manual_seed(1)
    # stored as cz_gemm gets them: A is [k, m] when transposed, B [n, k]
    a = torch.rand(lead + ((k, m) if s["ta"] == "T" else (m, k)), generator=g) - 0.5
    b = torch.rand(lead + ((n, k) if s["tb"] == "T" else (k, n)), generator=g) - 0.5
    a = a.transpose(-1, -2) if s["ta"] == "T" else a
    b = b.transpose(-1, -2) if s["tb"] == "T" else b
    flops = 2.0 * m * n * k * (int(s["batch"]) if s["batch"] else 1)
    return a.to(dtype), b.to(dtype), torch.empty(lead + (m, n), dtype=dtype), flops


def measure(a, b, c, flops, min_time):
    torch.matmul(a, b, out=c)  # warm-up: page faults, BLAS buffers
    iters, t0 = 0, time.perf_counter()
    while True:
        torch.matmul(a, b, out=c)
        iters += 1
        t = time.perf_counter() - t0
        if t >= min_time:
            return flops * iters / t * 1e-9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shapes_file")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--min-time", type=float, default=0.2)
    p.add_argument("--name", default="torch")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    o = p.parse_args()
    dtype = torch.bfloat16 if o.dtype == "bf16" else torch.float32
    shapes = shapes_of(o.shapes_file)
    if not shapes:
        raise SystemExit(f"{o.shapes_file}: no bench-gemm_bench sample lines")
    blas = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    print(f"# torch {torch.__version__} ({torch.__file__}): BLAS_INFO="
          f"{blas.group(1) if blas else '?'}, mkldnn {torch.backends.mkldnn.is_available()}",
          flush=True)
    name = f"{o.name}-{torch.__version__.split('+')[0]}" + ("-bf16" if o.dtype == "bf16" else "")
    ops = {key: operands(s, dtype) for key, s in shapes.items()}
    for _ in range(o.rounds):
        for threads in [int(t) for t in o.threads.split(",")]:
            torch.set_num_threads(threads)
            for key, (a, b, c, flops) in ops.items():
                gf = measure(a, b, c, flops, o.min_time)
                print(f"sample\t{name}\t{key}\t{threads}\t{gf:.1f}", flush=True)


if __name__ == "__main__":
    main()
