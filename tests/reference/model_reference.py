#!/usr/bin/env python3
"""Independent PyTorch reference for cloze's BERT and GPT models.

Usage: model_reference.py <model_dump executable>

For each architecture, runs the C driver (tests/model_dump.c), which writes
config.json, the initial weights, a batch, cloze's loss and gradients and the
losses of 10 AdamW steps. This script re-implements the models in plain torch
(float64, autograd; Hugging Face BertForPreTraining / OpenAIGPTLMHeadModel
semantics, written from the papers, no cloze code), loads the same weights and
batch, and checks:
  loss within 1e-5 relative;
  every parameter's gradient: max|g_c - g_ref| / max|g_ref| < 1e-4, where the
    denominator is floored at 1e-4 * (largest gradient of the model) because
    some tensors have a mathematically zero gradient (a key bias adds the
    same q.b_k to every score of a row, which softmax ignores);
  10 AdamW steps (decoupled weight decay 0.01) on both sides: losses within
    1e-4 relative.
Exit 77 (skipped) when torch is missing.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

torch.set_num_threads(1)
DT = torch.float64


def load_safetensors(path):
    """The format: u64 LE header length, JSON header, raw little-endian data."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (path, name, info["dtype"])
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
        out[name] = torch.tensor(arr.astype(np.float64))
    return out


def load_batch(path):
    batch = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            batch[parts[0]] = [int(v) for v in parts[1:]]
    B, T, P = batch.pop("shape")
    t = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
    for k in ("tokens", "attn_mask", "segments", "targets"):
        if k in t:
            t[k] = t[k].view(B, T)
    for k in ("mlm_positions", "mlm_labels", "mlm_weights"):
        if k in t:
            t[k] = t[k].view(B, P)
    return B, T, P, t


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def attention(q, k, v, heads, add_mask):
    """q, k, v: [B, T, H]; add_mask broadcast onto scores [B, A, T, T]."""
    B, T, H = q.shape
    d = H // heads

    def split(x):
        return x.view(B, T, heads, d).transpose(1, 2)

    s = split(q) @ split(k).transpose(-1, -2) / math.sqrt(d) + add_mask
    p = torch.softmax(s, dim=-1)
    return (p @ split(v)).transpose(1, 2).reshape(B, T, H)


def bert_encoder(W, cfg, batch):
    """The last layer's states [B, T, H] (also used by head_reference.py)."""
    H, A, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    act = gelu_tanh if cfg["hidden_act"] == "gelu_new" else gelu_erf
    tok, seg, mask = batch["tokens"], batch["segments"], batch["attn_mask"]
    B, T = tok.shape
    e = (
        W["bert.embeddings.word_embeddings.weight"][tok]
        + W["bert.embeddings.position_embeddings.weight"][torch.arange(T)][None]
        + W["bert.embeddings.token_type_embeddings.weight"][seg]
    )
    ln = lambda x, p: F.layer_norm(x, (H,), W[p + ".weight"], W[p + ".bias"], eps)
    lin = lambda x, p: F.linear(x, W[p + ".weight"], W[p + ".bias"])
    x = ln(e, "bert.embeddings.LayerNorm")
    # padded keys: additive -10000 (Hugging Face's extended attention mask)
    add = ((1.0 - mask.to(DT)) * -10000.0)[:, None, None, :]
    for l in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{l}."
        a = attention(
            lin(x, p + "attention.self.query"),
            lin(x, p + "attention.self.key"),
            lin(x, p + "attention.self.value"),
            A,
            add,
        )
        h = ln(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        f = lin(act(lin(h, p + "intermediate.dense")), p + "output.dense")
        x = ln(h + f, p + "output.LayerNorm")
    return x


def bert_loss(W, cfg, batch):
    H, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
    act = gelu_tanh if cfg["hidden_act"] == "gelu_new" else gelu_erf
    ln = lambda x, p: F.layer_norm(x, (H,), W[p + ".weight"], W[p + ".bias"], eps)
    lin = lambda x, p: F.linear(x, W[p + ".weight"], W[p + ".bias"])
    x = bert_encoder(W, cfg, batch)
    B = x.shape[0]
    pos = batch["mlm_positions"]
    sel = x[torch.arange(B)[:, None], pos]  # [B, P, H]
    z = ln(act(lin(sel, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    logits = z @ W["bert.embeddings.word_embeddings.weight"].T + W["cls.predictions.bias"]
    w = batch["mlm_weights"].to(DT).view(-1)
    ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), batch["mlm_labels"].view(-1), reduction="none")
    mlm = (ce * w).sum() / w.sum()
    pooled = torch.tanh(lin(x[:, 0], "bert.pooler.dense"))
    nsp = F.cross_entropy(lin(pooled, "cls.seq_relationship"), batch["nsp_labels"])
    return mlm + nsp


def gpt_decoder(W, cfg, batch):
    """The last layer's states [B, T, H] (also used by head_reference.py)."""
    H, A, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    act = gelu_tanh if cfg["afn"] == "gelu" else gelu_erf
    tok, mask = batch["tokens"], batch["attn_mask"]
    B, T = tok.shape
    x = W["transformer.tokens_embed.weight"][tok] + W["transformer.positions_embed.weight"][torch.arange(T)][None]
    ln = lambda x, p: F.layer_norm(x, (H,), W[p + ".weight"], W[p + ".bias"], eps)
    conv = lambda x, p: x @ W[p + ".weight"] + W[p + ".bias"]  # HF Conv1D: weight [in, out]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    add = torch.zeros(B, 1, T, T, dtype=DT).masked_fill(~causal, float("-inf"))
    add = add + ((1.0 - mask.to(DT)) * -10000.0)[:, None, None, :]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        q, k, v = conv(x, p + "attn.c_attn").split(H, dim=-1)
        a = conv(attention(q, k, v, A, add), p + "attn.c_proj")
        n = ln(x + a, p + "ln_1")
        m = conv(act(conv(n, p + "mlp.c_fc")), p + "mlp.c_proj")
        x = ln(n + m, p + "ln_2")
    return x


def gpt_loss(W, cfg, batch):
    x = gpt_decoder(W, cfg, batch)
    logits = x @ W["transformer.tokens_embed.weight"].T
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), batch["targets"].view(-1), ignore_index=-1)


def no_decay(name):
    return name.endswith(".bias") or "LayerNorm" in name or ".ln_" in name


def check(arch, exe, tmp):
    d = os.path.join(tmp, arch)
    os.makedirs(d)
    subprocess.run([exe, arch, d], check=True)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    W = load_safetensors(os.path.join(d, "weights.safetensors"))
    G = load_safetensors(os.path.join(d, "grads.safetensors"))
    _, _, _, batch = load_batch(os.path.join(d, "batch.txt"))
    res = {}
    adam_c = []
    with open(os.path.join(d, "result.txt")) as f:
        for line in f:
            k, *v = line.split()
            if k == "adamw":
                adam_c.append(float(v[1]))
            else:
                res[k] = float(v[0])
    loss_fn = bert_loss if arch == "bert" else gpt_loss
    params = {k: v.clone().requires_grad_(True) for k, v in W.items()}
    loss = loss_fn(params, cfg, batch)
    loss.backward()
    ok = True
    rel = abs(res["loss"] - loss.item()) / abs(loss.item())
    print(f"{arch}: loss cloze {res['loss']:.8f} torch {loss.item():.8f} rel {rel:.2e}")
    ok &= rel < 1e-5
    gmax = max(p.grad.abs().max().item() for p in params.values())
    worst, worst_name = 0.0, ""
    for name, p in params.items():
        ref = p.grad
        got = G[name]
        assert got.shape == ref.shape, (name, got.shape, ref.shape)
        denom = max(ref.abs().max().item(), 1e-4 * gmax)
        r = (got - ref).abs().max().item() / denom
        if r > worst:
            worst, worst_name = r, name
        if r >= 1e-4:
            print(f"{arch}: gradient {name}: rel diff {r:.2e}")
            ok = False
    print(f"{arch}: {len(params)} gradients, worst rel diff {worst:.2e} ({worst_name})")

    # 10 AdamW steps, torch side (same rule as model_dump.c / torch.optim.AdamW)
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-6, 0.01
    P = {k: v.clone().requires_grad_(True) for k, v in W.items()}
    m = {k: torch.zeros_like(v) for k, v in W.items()}
    v2 = {k: torch.zeros_like(v) for k, v in W.items()}
    adam_t = []
    for step in range(11):
        for p in P.values():
            p.grad = None
        loss = loss_fn(P, cfg, batch)
        adam_t.append(loss.item())
        if step == 10:
            break
        loss.backward()
        t = step + 1
        with torch.no_grad():
            for k, p in P.items():
                g = p.grad
                m[k].mul_(b1).add_(g, alpha=1 - b1)
                v2[k].mul_(b2).add_(g * g, alpha=1 - b2)
                if not no_decay(k):
                    p.mul_(1 - lr * wd)
                p.sub_(lr * (m[k] / (1 - b1**t)) / ((v2[k] / (1 - b2**t)).sqrt() + eps))
    worst_step = max(abs(a - b) / abs(b) for a, b in zip(adam_c, adam_t))
    print(f"{arch}: AdamW losses cloze {adam_c[0]:.6f} -> {adam_c[-1]:.6f}, "
          f"torch {adam_t[0]:.6f} -> {adam_t[-1]:.6f}, worst rel diff {worst_step:.2e}")
    ok &= len(adam_c) == 11 and worst_step < 1e-4
    ok &= adam_t[-1] < adam_t[0]  # the steps do something
    return ok


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        ok_bert = check("bert", exe, tmp)
        ok_gpt = check("gpt", exe, tmp)
        ok = ok_bert and ok_gpt
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
