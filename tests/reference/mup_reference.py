#!/usr/bin/env python3
"""cloze's µP (model.parametrization = mup) against Microsoft's mup package.

Usage: mup_reference.py <model_dump executable>

For BERT, GPT-1 (post-LN) and GPT-2's layout (pre-LN), runs
`model_dump <arch>-mup DIR` (tests/model_dump.c): the model of
model_reference.py / gpt2_reference.py at hidden 128 on mup_base_width 32
(width multiplier w = 4), its initial values' statistics and µP facts
(mup.txt), weights, a batch, loss, gradients and the losses of 10 AdamW
steps taken with cloze's per-tensor multipliers. Then builds the same network
as torch modules, the way a mup user would: every tensor one nn.Parameter
under cloze's name, the readouts mup.MuSharedReadout (the word embedding
tied as LM / MLM decoder, output_mult 1) and mup.MuReadout (BERT's NSP
classifier), attention logits q.k * sqrt(d0) / d_head (d0 = base / heads:
cloze's definition, 1/d_head in width), base shapes from the same network at
hidden 32 (mup.set_base_shapes; heads fixed, intermediate 4 x hidden), and
checks:
  init: each tensor re-initialised with mup.init.trunc_normal_ (std
    init_range, GPT-2's residual projections init_range / sqrt(2L), cut at 2
    std; biases 0, LayerNorm gains 1) has the rms of cloze's initial values
    within 6 standard errors of the difference of two sample rms of n values
    (the rms of n draws of a normal cut at 2 std has relative standard error
    sqrt((kurtosis - 1) / (4 n)), kurtosis of the cut normal computed
    below; a factor sqrt(w) = 2 off is a 50 % or 100 % error, the tolerance
    31 % for BERT's 256-value segment table, under 6 % for every other);
  lr / weight decay: each tensor's multipliers in mup.MuAdamW's param groups
    (group lr / lr, group weight_decay / weight_decay) equal cloze's exactly;
  output multiplier: 1 / MuReadout.width_mult() equals cloze's (also NSP's);
  loss within 1e-5 relative and every gradient within 1e-4 (of its tensor's
    largest; model_reference.py's rule) at cloze's weights;
  10 steps of mup.MuAdamW (torch.optim.AdamW inside, decay 0.01 on weights,
    none on biases and LayerNorms): losses within 1e-5 relative of cloze's.
Exit 77 (skipped) when torch or mup is missing.
"""
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import mup
    from model_reference import gelu_erf, gelu_tanh, load_batch, load_safetensors
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

torch.set_num_threads(1)
DT = torch.float64
LR, WD, INIT = 1e-3, 0.01, 0.02


def shapes(arch, layout, V, H, L, P, I):
    """cloze's tensors of this layout: name -> (shape, kind), kind one of
    weight, resid (GPT-2's residual projections), bias, gain."""
    t = {}

    def lin(p, i, o, conv):
        t[p + ".weight"] = ((i, o) if conv else (o, i), "weight")
        t[p + ".bias"] = ((o,), "bias")

    def ln(p):
        t[p + ".weight"] = ((H,), "gain")
        t[p + ".bias"] = ((H,), "bias")

    if arch == "bert":
        t["bert.embeddings.word_embeddings.weight"] = ((V, H), "weight")
        t["bert.embeddings.position_embeddings.weight"] = ((P, H), "weight")
        t["bert.embeddings.token_type_embeddings.weight"] = ((2, H), "weight")
        ln("bert.embeddings.LayerNorm")
        for l in range(L):
            p = f"bert.encoder.layer.{l}."
            for n in ("query", "key", "value"):
                lin(p + "attention.self." + n, H, H, False)
            lin(p + "attention.output.dense", H, H, False)
            ln(p + "attention.output.LayerNorm")
            lin(p + "intermediate.dense", H, I, False)
            lin(p + "output.dense", I, H, False)
            ln(p + "output.LayerNorm")
        lin("cls.predictions.transform.dense", H, H, False)
        ln("cls.predictions.transform.LayerNorm")
        t["cls.predictions.bias"] = ((V,), "bias")
        lin("bert.pooler.dense", H, H, False)
        # cls.seq_relationship is the MuReadout's own parameters
        return t
    pre = layout == "pre_ln"
    t["transformer.wte.weight" if pre else "transformer.tokens_embed.weight"] = ((V, H), "weight")
    t["transformer.wpe.weight" if pre else "transformer.positions_embed.weight"] = ((P, H), "weight")
    for l in range(L):
        p = f"transformer.h.{l}."
        lin(p + "attn.c_attn", H, 3 * H, True)
        lin(p + "attn.c_proj", H, H, True)
        lin(p + "mlp.c_fc", H, I, True)
        lin(p + "mlp.c_proj", I, H, True)
        ln(p + "ln_1")
        ln(p + "ln_2")
        if pre:
            t[p + "attn.c_proj.weight"] = (t[p + "attn.c_proj.weight"][0], "resid")
            t[p + "mlp.c_proj.weight"] = (t[p + "mlp.c_proj.weight"][0], "resid")
    if pre:
        ln("transformer.ln_f")
    return t


class Net(nn.Module):
    """cloze's network, every tensor a Parameter under its name (dots as
    '__'), the readouts mup's."""

    def __init__(self, arch, layout, cfg):
        super().__init__()
        self.arch, self.layout, self.cfg = arch, layout, cfg
        H, V, L, P, I = cfg["H"], cfg["V"], cfg["L"], cfg["P"], cfg["I"]
        self.kinds = {}
        for name, (shape, kind) in shapes(arch, layout, V, H, L, P, I).items():
            self.register_parameter(name.replace(".", "__"), nn.Parameter(torch.zeros(shape, dtype=DT)))
            self.kinds[name] = kind
        wte = self.p("bert.embeddings.word_embeddings.weight" if arch == "bert" else
                     "transformer.wte.weight" if layout == "pre_ln" else "transformer.tokens_embed.weight")
        # the tied decoder: logits = (h / width_mult) W_e^T (+ BERT's output bias)
        self.readout = mup.MuSharedReadout(wte, bias=False)
        if arch == "bert":
            self.nsp = mup.MuReadout(H, 2).to(DT)
            self.kinds["cls.seq_relationship.weight"] = "weight"
            self.kinds["cls.seq_relationship.bias"] = "bias"

    def p(self, name):
        if name.startswith("cls.seq_relationship."):
            return getattr(self.nsp, name.split(".")[-1])
        return getattr(self, name.replace(".", "__"))

    def names(self):
        return list(self.kinds)

    def attention(self, q, k, v, add):
        B, T, H = q.shape
        A = self.cfg["A"]
        d, d0 = H // A, self.cfg["base"] / A

        def split(x):
            return x.view(B, T, A, d).transpose(1, 2)

        s = split(q) @ split(k).transpose(-1, -2) * (math.sqrt(d0) / d) + add
        return (torch.softmax(s, dim=-1) @ split(v)).transpose(1, 2).reshape(B, T, H)

    def loss(self, batch):
        c, P_ = self.cfg, self.p
        H, eps = c["H"], c["eps"]
        ln = lambda x, p: F.layer_norm(x, (H,), P_(p + ".weight"), P_(p + ".bias"), eps)
        tok, mask = batch["tokens"], batch["attn_mask"]
        B, T = tok.shape
        if self.arch == "bert":
            lin = lambda x, p: F.linear(x, P_(p + ".weight"), P_(p + ".bias"))
            e = (P_("bert.embeddings.word_embeddings.weight")[tok]
                 + P_("bert.embeddings.position_embeddings.weight")[torch.arange(T)][None]
                 + P_("bert.embeddings.token_type_embeddings.weight")[batch["segments"]])
            x = ln(e, "bert.embeddings.LayerNorm")
            add = ((1.0 - mask.to(DT)) * -10000.0)[:, None, None, :]
            for l in range(c["L"]):
                p = f"bert.encoder.layer.{l}."
                a = self.attention(lin(x, p + "attention.self.query"), lin(x, p + "attention.self.key"),
                                   lin(x, p + "attention.self.value"), add)
                h = ln(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
                f = lin(gelu_erf(lin(h, p + "intermediate.dense")), p + "output.dense")
                x = ln(h + f, p + "output.LayerNorm")
            sel = x[torch.arange(B)[:, None], batch["mlm_positions"]]
            z = ln(gelu_erf(lin(sel, "cls.predictions.transform.dense")),
                   "cls.predictions.transform.LayerNorm")
            logits = self.readout(z) + P_("cls.predictions.bias")
            w = batch["mlm_weights"].to(DT).view(-1)
            ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), batch["mlm_labels"].view(-1),
                                 reduction="none")
            pooled = torch.tanh(lin(x[:, 0], "bert.pooler.dense"))
            return (ce * w).sum() / w.sum() + F.cross_entropy(self.nsp(pooled), batch["nsp_labels"])
        pre = self.layout == "pre_ln"
        conv = lambda x, p: x @ P_(p + ".weight") + P_(p + ".bias")
        wte = "transformer.wte.weight" if pre else "transformer.tokens_embed.weight"
        wpe = "transformer.wpe.weight" if pre else "transformer.positions_embed.weight"
        x = P_(wte)[tok] + P_(wpe)[torch.arange(T)][None]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        add = torch.zeros(B, 1, T, T, dtype=DT).masked_fill(~causal, float("-inf"))
        add = add + ((1.0 - mask.to(DT)) * -10000.0)[:, None, None, :]
        for l in range(c["L"]):
            p = f"transformer.h.{l}."
            def attn(y):
                q, k, v = conv(y, p + "attn.c_attn").split(H, dim=-1)
                return conv(self.attention(q, k, v, add), p + "attn.c_proj")
            mlp = lambda y: conv(gelu_tanh(conv(y, p + "mlp.c_fc")), p + "mlp.c_proj")
            if pre:
                x = x + attn(ln(x, p + "ln_1"))
                x = x + mlp(ln(x, p + "ln_2"))
            else:
                n = ln(x + attn(x), p + "ln_1")
                x = ln(n + mlp(n), p + "ln_2")
        if pre:
            x = ln(x, "transformer.ln_f")
        logits = self.readout(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["targets"].reshape(-1),
                               ignore_index=-1)


def make(arch, layout, cfg, width):
    """The network at `width` with mup's base shapes (the same at cfg's base)."""
    def at(h):
        c = dict(cfg, H=h, I=4 * h)
        return Net(arch, layout, c)
    model = at(width)
    mup.set_base_shapes(model, at(cfg["base"]), rescale_params=False)
    return model


def no_decay(name):
    return name.endswith(".bias") or "LayerNorm" in name or ".ln_" in name


def cut_normal_kurtosis(c=2.0, n=200000):
    """E[z^4] / E[z^2]^2 of a standard normal cut at +-c (midpoint rule)."""
    h = 2 * c / n
    m2 = m4 = z0 = 0.0
    for i in range(n):
        z = -c + (i + 0.5) * h
        w = math.exp(-z * z / 2)
        z0 += w
        m2 += w * z * z
        m4 += w * z ** 4
    return (m4 / z0) / (m2 / z0) ** 2


def check(arch, exe, tmp):
    d = os.path.join(tmp, arch)
    os.makedirs(d)
    subprocess.run([exe, arch + "-mup", d], check=True, stderr=subprocess.DEVNULL)
    info, cl = {}, {}
    for line in open(os.path.join(d, "mup.txt")):
        k, *v = line.split()
        if k == "tensor":
            cl[v[0]] = dict(matrix=int(v[1]), lr=float(v[2]), wd=float(v[3]), rms=float(v[4]), n=int(v[5]))
        else:
            info[k] = float(v[0])
    import json
    hf = json.load(open(os.path.join(d, "config.json")))
    layout = "post_ln"
    if arch == "gpt2":
        layout, arch = "pre_ln", "gpt"
    label = arch if layout == "post_ln" else "gpt2"
    g = lambda *ks: next(hf[k] for k in ks if k in hf)
    cfg = dict(V=g("vocab_size"), H=g("hidden_size", "n_embd"), L=g("num_hidden_layers", "n_layer"),
               A=g("num_attention_heads", "n_head"), P=g("max_position_embeddings", "n_positions"),
               eps=g("layer_norm_eps", "layer_norm_epsilon"), base=int(info["base_width"]))
    cfg["I"] = 4 * cfg["H"]
    ok = True
    # ---- init, multipliers, output multiplier: a fresh mup network ----
    torch.manual_seed(0)
    model = make(arch, layout, cfg, cfg["H"])
    kurt = cut_normal_kurtosis()
    worst = 0.0
    for name in model.names():
        p, kind = model.p(name), model.kinds[name]
        with torch.no_grad():
            if kind == "bias":
                p.zero_()
            elif kind == "gain":
                p.fill_(1.0)
            else:
                std = INIT / math.sqrt(2 * cfg["L"]) if kind == "resid" else INIT
                mup.init.trunc_normal_(p, std=std, a=-2 * std, b=2 * std)
        c = cl[name]
        rms_t = p.pow(2).mean().sqrt().item()
        rms_c = c["rms"]
        n = p.numel()
        if c["n"] != n:  # GPT-2's padded word embedding: its zero rows are cloze's alone
            rms_c *= math.sqrt(c["n"] / n)
        if kind in ("bias", "gain"):
            good = rms_c == rms_t
        else:
            tol = 6 * rms_t * math.sqrt(2 * (kurt - 1) / (4 * n))
            good = abs(rms_c - rms_t) <= tol
            worst = max(worst, abs(rms_c - rms_t) / tol)
        if not good:
            print(f"{label}: init {name}: rms cloze {rms_c:.6g} mup {rms_t:.6g}")
            ok = False
    print(f"{label}: {len(model.names())} tensors' initial rms as mup.init gives them "
          f"(worst {worst:.2f} of the 6-standard-error tolerance)")
    named = {id(model.p(n)): n for n in model.names()}
    groups = [{"params": [model.p(n) for n in model.names() if not no_decay(n)], "weight_decay": WD},
              {"params": [model.p(n) for n in model.names() if no_decay(n)], "weight_decay": 0.0}]
    opt = mup.MuAdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-6)
    seen = 0
    for grp in opt.param_groups:
        for p in grp["params"]:
            name = named[id(p)]
            c = cl[name]
            lr_m = grp["lr"] / LR
            wd_m = grp["weight_decay"] / WD if grp["weight_decay"] else 1.0  # no decay: mup leaves it
            matrix = p.infshape.ninf() == 2
            if lr_m != c["lr"] or wd_m != c["wd"] or matrix != bool(c["matrix"]):
                print(f"{label}: {name}: mup lr x {lr_m}, wd x {wd_m}, matrix-like {matrix}; "
                      f"cloze lr x {c['lr']}, wd x {c['wd']}, matrix-like {c['matrix']}")
                ok = False
            seen += 1
    ok &= seen == len(cl)
    mult_ok = ok
    om = 1 / model.readout.width_mult()
    om_ok = om == info["output_mult"] and (arch != "bert" or 1 / model.nsp.width_mult() == om)
    print(f"{label}: MuAdamW's lr and wd multipliers of all {seen} tensors "
          f"{'equal' if mult_ok else 'DIFFER from'} cloze's; output multiplier mup {om} cloze "
          f"{info['output_mult']}")
    # attention: q.k sqrt(d0)/d (Net.attention), cloze's in float32
    scale = math.sqrt(cfg["base"] / cfg["A"]) / (cfg["H"] / cfg["A"])
    a_ok = abs(info["attn_scale"] - scale) <= 1e-7 * scale
    if not (om_ok and a_ok and seen == len(cl)):
        print(f"{label}: FAILED: output multiplier {om_ok}, attention scale cloze "
              f"{info['attn_scale']} want {scale}, tensors {seen} of {len(cl)}")
    ok &= om_ok and a_ok

    # ---- loss and gradients at cloze's weights ----
    W = load_safetensors(os.path.join(d, "weights.safetensors"))
    G = load_safetensors(os.path.join(d, "grads.safetensors"))
    _, _, _, batch = load_batch(os.path.join(d, "batch.txt"))
    res, adam_c = {}, []
    for line in open(os.path.join(d, "result.txt")):
        k, *v = line.split()
        if k == "adamw":
            adam_c.append(float(v[1]))
        else:
            res[k] = float(v[0])

    def loaded():
        m = make(arch, layout, cfg, cfg["H"])
        with torch.no_grad():
            for name in m.names():
                p = m.p(name)
                p.copy_(W[name][: p.shape[0]])
        return m

    m = loaded()
    loss = m.loss(batch)
    loss.backward()
    rel = abs(res["loss"] - loss.item()) / abs(loss.item())
    ok &= rel < 1e-5
    gmax = max(m.p(n).grad.abs().max().item() for n in m.names())
    gworst = 0.0
    for name in m.names():
        ref = m.p(name).grad
        got = G[name][: ref.shape[0]]
        r = (got - ref).abs().max().item() / max(ref.abs().max().item(), 1e-4 * gmax)
        gworst = max(gworst, r)
        if r >= 1e-4:
            print(f"{label}: gradient {name}: rel diff {r:.2e}")
            ok = False
    print(f"{label}: loss cloze {res['loss']:.8f} torch+mup {loss.item():.8f} rel {rel:.2e}; "
          f"{len(m.names())} gradients, worst rel diff {gworst:.2e}")

    # ---- 10 MuAdamW steps ----
    m = loaded()
    groups = [{"params": [m.p(n) for n in m.names() if not no_decay(n)], "weight_decay": WD},
              {"params": [m.p(n) for n in m.names() if no_decay(n)], "weight_decay": 0.0}]
    opt = mup.MuAdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-6)
    adam_t = []
    for step in range(11):
        opt.zero_grad()
        loss = m.loss(batch)
        adam_t.append(loss.item())
        if step == 10:
            break
        loss.backward()
        opt.step()
    worst_step = max(abs(a - b) / abs(b) for a, b in zip(adam_c, adam_t))
    print(f"{label}: MuAdamW losses cloze {adam_c[0]:.6f} -> {adam_c[-1]:.6f}, torch+mup "
          f"{adam_t[0]:.6f} -> {adam_t[-1]:.6f}, worst rel diff {worst_step:.2e}")
    ok &= len(adam_c) == 11 and worst_step < 1e-5 and adam_t[-1] < adam_t[0]
    return ok


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ("gpt2", "gpt", "bert"):
            ok &= check(arch, sys.argv[1], tmp)
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
