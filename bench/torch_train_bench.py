#!/usr/bin/env python3
"""PyTorch side of the end-to-end training benchmark: the same BERT (MLM at
max_pred positions + NSP) or GPT model as cloze, same shapes, fp32 or bf16 autocast, AdamW,
timed per optimizer step on random token batches.

usage: torch_train_bench.py --arch bert|gpt --layers L --hidden H --heads A
       --seq T --batch B [--vocab V] [--max-pred P] [--steps N] [--threads N]
       [--attn mha|sdpa] [--compile] [--precision fp32|bf16] [--layout post_ln|pre_ln]

--layout pre_ln (GPT only): GPT-2's blocks, as cloze's model.layout = pre_ln:
x + Drop(Attn(LN1(x))), then x + Drop(MLP(LN2(x))) with the tanh GELU, and
a final LayerNorm before the tied LM head.

--attn: nn.MultiheadAttention (the only choice in PyTorch 1.13) or one
fused q/k/v projection with F.scaled_dot_product_attention (PyTorch >= 2.0,
the default there). --compile: torch.compile the model (PyTorch >= 2.0);
its compilation falls in the 2 warm-up steps, which are not timed.
--precision bf16: forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), PyTorch's own mixed precision (fp32 master weights
and optimizer; on AMX CPUs its products run on AMX through oneDNN): the
peer of cloze's model.matmul_precision = "bf16".

Several ranks (data parallel, DistributedDataParallel over gloo, the
counterpart of cloze's all-reduce): start R processes with RANK=0..R-1,
WORLD_SIZE=R, MASTER_ADDR=127.0.0.1, MASTER_PORT=<free port> (as
bench/e2e_vs_torch.sh does; torch.distributed.run of torch 1.13 fails under
Python 3.11).
--batch is then the global batch (each rank takes batch / R); rank 0 prints
the line, with the largest peak RSS over the ranks.

Run it at its best (see docs/performance.md): OMP_WAIT_POLICY=PASSIVE, and
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset so that OpenBLAS picks AVX-512.
Prints one line: tokens/s (median over steps after 2 warm-up steps) and peak
RSS."""
import argparse
import contextlib
import os
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    """q, k, v from one [3h, h] product, then F.scaled_dot_product_attention
    (the path PyTorch 2 recommends; torch.compile fuses around it)."""

    def __init__(self, h, a, causal):
        super().__init__()
        self.qkv = nn.Linear(h, 3 * h)
        self.out = nn.Linear(h, h)
        self.a = a
        self.causal = causal

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.a, h // self.a).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0,
                                           is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, t, h))


class Block(nn.Module):
    def __init__(self, h, a, causal, sdpa, pre_ln=False):
        super().__init__()
        self.pre_ln = pre_ln
        self.sdpa = sdpa
        if sdpa:
            self.attn = SelfAttention(h, a, causal)
        else:
            self.attn = nn.MultiheadAttention(h, a, dropout=0.1, batch_first=True)
        self.ln1 = nn.LayerNorm(h, eps=1e-12)
        self.ff1 = nn.Linear(h, 4 * h)
        self.ff2 = nn.Linear(4 * h, h)
        self.ln2 = nn.LayerNorm(h, eps=1e-12)
        self.drop = nn.Dropout(0.1)
        self.causal = causal

    def attend(self, x, mask):
        if self.sdpa:
            return self.attn(x)
        a, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
        return a

    def forward(self, x, mask):
        if self.pre_ln:  # GPT-2: LN before each sub-layer
            x = x + self.drop(self.attend(self.ln1(x), mask))
            return x + self.drop(self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh")))
        x = self.ln1(x + self.drop(self.attend(x, mask)))  # post-LN, as BERT and GPT-1
        f = self.ff2(F.gelu(self.ff1(x)))
        return self.ln2(x + self.drop(f))


class Model(nn.Module):
    def __init__(self, arch, vocab, layers, h, a, seq, sdpa, pre_ln=False):
        super().__init__()
        self.arch = arch
        self.sdpa = sdpa
        self.tok = nn.Embedding(vocab, h)
        self.pos = nn.Embedding(max(512, seq), h)
        self.blocks = nn.ModuleList([Block(h, a, arch == "gpt", sdpa, pre_ln) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(h, eps=1e-5) if pre_ln else None
        self.drop = nn.Dropout(0.1)
        if arch == "bert":
            # BERT-only parts; GPT must not own them, or DDP waits for
            # gradients that never come (unused parameters)
            self.seg = nn.Embedding(2, h)
            self.ln = nn.LayerNorm(h, eps=1e-12)
            self.mlm_dense = nn.Linear(h, h)
            self.mlm_ln = nn.LayerNorm(h, eps=1e-12)
            self.mlm_bias = nn.Parameter(torch.zeros(vocab))
            self.pool = nn.Linear(h, h)
            self.nsp = nn.Linear(h, 2)

    def forward(self, ids, segs, positions, labels, nsp_labels):
        b, t = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(t))[None]
        mask = None
        if self.arch == "bert":
            x = self.ln(x + self.seg(segs))
        elif not self.sdpa:
            mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.drop(x)
        for blk in self.blocks:
            x = blk(x, mask)
        if self.ln_f is not None:
            x = self.ln_f(x)
        if self.arch == "gpt":
            logits = x[:, :-1] @ self.tok.weight.t()
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        sel = torch.gather(x, 1, positions[:, :, None].expand(-1, -1, x.shape[-1]))
        sel = self.mlm_ln(F.gelu(self.mlm_dense(sel)))
        logits = sel @ self.tok.weight.t() + self.mlm_bias
        mlm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        nsp = F.cross_entropy(self.nsp(torch.tanh(self.pool(x[:, 0]))), nsp_labels)
        return mlm + nsp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="bert")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--max-pred", type=int, default=20)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    p.add_argument("--attn", choices=["mha", "sdpa"], default="sdpa" if has_sdpa else "mha")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--layout", choices=["post_ln", "pre_ln"], default="post_ln")
    a = p.parse_args()
    if a.layout == "pre_ln" and a.arch != "gpt":
        p.error("--layout pre_ln is GPT-2's decoder: it needs --arch gpt")
    if a.attn == "sdpa" and not has_sdpa:
        p.error(f"--attn sdpa needs PyTorch >= 2.0 (this is {torch.__version__})")
    if a.compile and not hasattr(torch, "compile"):
        p.error(f"--compile needs PyTorch >= 2.0 (this is {torch.__version__})")
    torch.set_num_threads(a.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("gloo")
    torch.manual_seed(0)
    m = Model(a.arch, a.vocab, a.layers, a.hidden, a.heads, a.seq, a.attn == "sdpa",
              a.layout == "pre_ln")
    if world > 1:
        m = nn.parallel.DistributedDataParallel(m)
    if a.compile:
        m = torch.compile(m)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    b = a.batch // world
    torch.manual_seed(1 + rank)
    ids = torch.randint(0, a.vocab, (b, a.seq))
    segs = torch.randint(0, 2, (b, a.seq))
    pos = torch.sort(torch.randint(1, a.seq, (b, a.max_pred)), dim=1).values
    labels = torch.randint(0, a.vocab, (b, a.max_pred))
    nsp = torch.randint(0, 2, (b,))
    times = []
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16" \
        else contextlib.nullcontext
    for step in range(a.steps + 2):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = m(ids, segs, pos, labels, nsp)
        loss.backward()
        opt.step()
        if step >= 2:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if world > 1:
        t = torch.tensor([rss, med], dtype=torch.float64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        rss = t[0].item()
        if rank != 0:
            return
    how = f"{a.attn}{' compiled' if a.compile else ' eager'}, {a.precision}"
    arch = a.arch + (" pre_ln" if a.layout == "pre_ln" else "")
    print(f"torch {torch.__version__} ({how}) {arch} L={a.layers} H={a.hidden} seq={a.seq} batch={a.batch} ranks={world} threads={a.threads}: "
          f"{a.batch * a.seq / med:.0f} tokens/s (median step {med * 1000:.1f} ms over {len(times)}), "
          f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
