#!/usr/bin/env python3
"""The PyTorch reference of bench/gpt2_curve_vs_torch.sh: transformers'
GPT2LMHeadModel trained with cloze-train's recipe on the token windows
cloze-train used (bench-window_dump files), evaluated on cloze's held-out
windows.

usage: gpt2_curve_torch.py --train FILE --heldout FILE --seq T --vocab V
         --layers L --hidden H --heads A --steps N --batch G --micro M
         --lr LR --warmup W --min-lr-ratio R --beta2 B2 --wd WD --clip C
         --dropout P --eval-every K --threads N --seed S

Recipe, as cloze (src/optim/schedule.c, src/train/train.c): step s (0-based)
takes windows s*G .. s*G+G-1 in micro-batches of M; the step's loss is the
mean over micro-batches of each one's mean next-token loss; lr(s) = LR (s+1)/W
during warm-up, then cosine from LR to R x LR over the remaining steps;
global gradient-norm clipping at C; AdamW (betas 0.9/B2, eps 1e-8, decoupled
decay WD on weights, none on biases and LayerNorms); dropout P at GPT-2's
three sites. The held-out loss is the token-weighted mean over all held-out
windows. Prints one JSON line per evaluation: {"step", "eval_lm_loss"}, and
one per step: {"step", "lm_loss"}.
"""
import argparse
import json
import math

import numpy as np
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel


def load(path, seq):
    a = np.fromfile(path, dtype="<i4")
    n = a.size // (3 * seq)
    a = a.reshape(3, n, seq)
    return (torch.from_numpy(a[0].astype(np.int64)), torch.from_numpy(a[1].astype(np.int64)),
            torch.from_numpy(a[2].astype(np.int64)))


def mean_loss(model, tok, tgt, msk):
    logits = model(input_ids=tok, attention_mask=msk).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-1,
                           reduction="sum"), int((tgt >= 0).sum())


def main():
    p = argparse.ArgumentParser()
    for k, t in (("train", str), ("heldout", str), ("seq", int), ("vocab", int), ("layers", int),
                 ("hidden", int), ("heads", int), ("steps", int), ("batch", int), ("micro", int),
                 ("lr", float), ("warmup", int), ("min-lr-ratio", float), ("beta2", float),
                 ("wd", float), ("clip", float), ("dropout", float), ("eval-every", int),
                 ("threads", int), ("seed", int)):
        p.add_argument("--" + k, type=t, required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    tok, tgt, msk = load(a.train, a.seq)
    htok, htgt, hmsk = load(a.heldout, a.seq)
    assert tok.shape[0] >= a.steps * a.batch, "fewer training windows than steps x batch"
    conf = GPT2Config(vocab_size=a.vocab, n_embd=a.hidden, n_layer=a.layers, n_head=a.heads,
                      n_positions=a.seq, resid_pdrop=a.dropout, embd_pdrop=a.dropout,
                      attn_pdrop=a.dropout)
    model = GPT2LMHeadModel(conf)
    named = list(model.named_parameters())
    nd = lambda n: n.endswith(".bias") or ".ln_" in n
    opt = torch.optim.AdamW([{"params": [q for n, q in named if not nd(n)], "weight_decay": a.wd},
                             {"params": [q for n, q in named if nd(n)], "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)

    def lr_at(s):
        if s < a.warmup:
            return a.lr * (s + 1) / a.warmup
        span = a.steps - a.warmup
        prog = min(1.0, (s - a.warmup) / span) if span > 0 else 1.0
        return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * prog)))

    def evaluate(step):
        model.eval()
        tot, cnt = 0.0, 0
        with torch.no_grad():
            for i in range(0, htok.shape[0], a.micro):
                l, c = mean_loss(model, htok[i:i + a.micro], htgt[i:i + a.micro], hmsk[i:i + a.micro])
                tot, cnt = tot + l.item(), cnt + c
        model.train()
        print(json.dumps({"step": step, "eval_lm_loss": tot / cnt}), flush=True)

    model.train()
    evaluate(0)
    accum = a.batch // a.micro
    for s in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.zero_grad(set_to_none=True)
        step_loss = 0.0
        for m in range(accum):
            i = s * a.batch + m * a.micro
            l, c = mean_loss(model, tok[i:i + a.micro], tgt[i:i + a.micro], msk[i:i + a.micro])
            loss = l / c / accum  # the mean over micro-batches of each one's mean
            loss.backward()
            step_loss += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        print(json.dumps({"step": s + 1, "lm_loss": step_loss}), flush=True)
        if (s + 1) % a.eval_every == 0 or s + 1 == a.steps:
            evaluate(s + 1)


if __name__ == "__main__":
    main()
