#!/usr/bin/env python3
"""Independent PyTorch reference for cloze's classification heads.

Usage: head_reference.py <head_dump executable>

For BERT (BertForSequenceClassification: the pooler's tanh of [CLS], then
classifier, cross-entropy over 3 classes) and GPT-1 (the last layer's state
at the extract token into score without bias, cross-entropy, plus 0.5 x the
next-token LM loss, GPT-1 eq. 5), GPT-1's similarity head (Sec. 3.3: the
extract states of text1 $ text2 and text2 $ text1 added, then score, plus
0.5 LM) and multiple-choice heads (GPT-1 Sec. 3.3: one score per candidate
sequence, softmax over an example's candidates, plus 0.5 LM; BERT Sec. 4.4 /
BertForMultipleChoice: the pooled [CLS] of each candidate into a 1-output
classifier), runs the C driver (tests/head_dump.c),
recomputes the loss in float64 torch from the same weights and batch (the
encoders of model_reference.py, written from the papers) and checks:
  loss within 1e-5 relative (and the task / LM parts);
  every parameter's gradient: max|g_c - g_ref| / max|g_ref| < 1e-4, the
    denominator floored at 1e-4 x the largest gradient (as model_reference).
Exit 77 (skipped) when torch is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    import torch.nn.functional as F
    from model_reference import bert_encoder, gpt_decoder, load_batch, load_safetensors
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)


def bert_classify(W, cfg, batch):
    x = bert_encoder(W, cfg, batch)
    lin = lambda v, p: F.linear(v, W[p + ".weight"], W[p + ".bias"])
    pooled = torch.tanh(lin(x[:, 0], "bert.pooler.dense"))
    task = F.cross_entropy(lin(pooled, "classifier"), batch["labels"])
    return task, task, torch.zeros((), dtype=task.dtype)


def gpt_classify(W, cfg, batch):
    x = gpt_decoder(W, cfg, batch)
    B = x.shape[0]
    h = x[torch.arange(B), batch["cls_index"]]
    task = F.cross_entropy(h @ W["score.weight"].T, batch["labels"])
    logits = x @ W["transformer.tokens_embed.weight"].T
    lm = F.cross_entropy(logits.view(-1, logits.shape[-1]), batch["targets"].view(-1), ignore_index=-1)
    return task + 0.5 * lm, task, lm


def gpt_similar(W, cfg, batch, group):
    x = gpt_decoder(W, cfg, batch)
    B, H = x.shape[0], x.shape[-1]
    h = x[torch.arange(B), batch["cls_index"]]
    h = h.view(B // 2, 2, H).sum(1)  # both orderings of a pair, element-wise sum
    task = F.cross_entropy(h @ W["score.weight"].T, batch["labels"][::2])
    lm = gpt_lm(W, x, batch)
    return task + 0.5 * lm, task, lm


def gpt_lm(W, x, batch):
    logits = x @ W["transformer.tokens_embed.weight"].T
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), batch["targets"].view(-1), ignore_index=-1)


def gpt_choice(W, cfg, batch, group):
    x = gpt_decoder(W, cfg, batch)
    B = x.shape[0]
    scores = x[torch.arange(B), batch["cls_index"]] @ W["score.weight"].T  # [B, 1]
    task = F.cross_entropy(scores.view(B // group, group), batch["labels"][::group])
    lm = gpt_lm(W, x, batch)
    return task + 0.5 * lm, task, lm


def bert_choice(W, cfg, batch, group):
    x = bert_encoder(W, cfg, batch)
    lin = lambda v, p: F.linear(v, W[p + ".weight"], W[p + ".bias"])
    scores = lin(torch.tanh(lin(x[:, 0], "bert.pooler.dense")), "classifier")  # [B, 1]
    B = x.shape[0]
    task = F.cross_entropy(scores.view(B // group, group), batch["labels"][::group])
    return task, task, torch.zeros((), dtype=task.dtype)


HEADS = {
    "bert": lambda W, c, b, g: bert_classify(W, c, b),
    "gpt": lambda W, c, b, g: gpt_classify(W, c, b),
    "gpt-similar": gpt_similar,
    "gpt-choice": gpt_choice,
    "bert-choice": bert_choice,
}


def check(arch, exe, tmp):
    d = os.path.join(tmp, arch)
    os.makedirs(d)
    subprocess.run([exe, arch, d], check=True)
    cfg = json.load(open(os.path.join(d, "config.json")))
    W = load_safetensors(os.path.join(d, "weights.safetensors"))
    G = load_safetensors(os.path.join(d, "grads.safetensors"))
    _, _, _, batch = load_batch(os.path.join(d, "batch.txt"))
    res = {k: float(v) for k, v in (l.split() for l in open(os.path.join(d, "result.txt")))}
    params = {k: v.clone().requires_grad_(True) for k, v in W.items()}
    loss, task, lm = HEADS[arch](params, cfg, batch, int(res["group"]))
    loss.backward()
    ok = True
    for name, mine, ref in (("loss", res["loss"], loss.item()), ("task", res["task"], task.item()),
                            ("lm", res["lm"], lm.item())):
        if ref == 0 and mine == 0:
            continue
        rel = abs(mine - ref) / abs(ref)
        print(f"{arch}: {name} cloze {mine:.8f} torch {ref:.8f} rel {rel:.2e}")
        ok &= rel < 1e-5
    gmax = max(p.grad.abs().max().item() for p in params.values())
    worst, worst_name = 0.0, ""
    for name, p in params.items():
        ref, got = p.grad, G[name]
        assert got.shape == ref.shape, (name, got.shape, ref.shape)
        if arch == "bert-choice" and name == "classifier.bias":
            # one bias shared by every candidate: the softmax over them is
            # shift-invariant, so its gradient is 0 (rounding on both sides)
            if got.abs().max().item() > 1e-6 * gmax:
                print(f"{arch}: {name}: gradient {got.abs().max().item():.2e}, expected 0")
                ok = False
            continue
        r = (got - ref).abs().max().item() / max(ref.abs().max().item(), 1e-4 * gmax)
        if r > worst:
            worst, worst_name = r, name
        if r >= 1e-4:
            print(f"{arch}: gradient {name}: rel diff {r:.2e}")
            ok = False
    head = "classifier.weight" if arch.startswith("bert") else "score.weight"
    ok &= params[head].grad.abs().max().item() > 0  # the head takes part
    print(f"{arch}: {len(params)} gradients, worst rel diff {worst:.2e} ({worst_name})")
    return ok


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        ok = True
        for arch in HEADS:
            ok &= check(arch, sys.argv[1], tmp)
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
