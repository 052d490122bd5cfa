#!/usr/bin/env python3
"""cloze's pre-LN GPT (model.layout = pre_ln) against transformers' GPT2LMHeadModel.

Usage: gpt2_reference.py <model_dump executable>

Runs `model_dump gpt2 DIR` (tests/model_dump.c): a GPT-2-layout model (L=4,
H=128, A=4, vocabulary 5000 padded to 5056 rows with model.vocab_pad_to = 64),
its config.json, initial weights, a batch (one sequence padded), cloze's loss
and gradients and the losses of 10 AdamW steps. Then builds
transformers.GPT2LMHeadModel from that config.json in float64 (dropout off),
loads the weights (the word embedding's first 5000 rows: the padding rows are
cloze's alone) with no missing or unexpected key, and checks:
  loss (mean next-token cross-entropy over targets >= 0, from the model's
    logits) within 1e-5 relative;
  every parameter's gradient within 1e-4 of the largest of its tensor (the
    denominator floored at 1e-4 x the model's largest, as model_reference.py:
    a key bias has a mathematically zero gradient);
  the padding rows' gradient exactly 0 and their weights 0;
  10 steps of torch.optim.AdamW (decoupled decay 0.01 on weights, none on
    biases and LayerNorms, as model_dump.c): losses within 1e-4 relative.
Exit 77 (skipped) when transformers or torch is missing.
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
    from transformers import GPT2Config, GPT2LMHeadModel
    from model_reference import load_batch, load_safetensors
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

torch.set_num_threads(1)


def no_decay(name):
    return name.endswith(".bias") or ".ln_" in name


def build(cfg, W):
    conf = GPT2Config(
        vocab_size=cfg["vocab_size"],
        n_embd=cfg["n_embd"],
        n_layer=cfg["n_layer"],
        n_head=cfg["n_head"],
        n_positions=cfg["n_positions"],
        n_inner=cfg["n_inner"],
        activation_function=cfg["activation_function"],
        layer_norm_epsilon=cfg["layer_norm_epsilon"],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(conf).double().eval()
    V = cfg["vocab_size"]
    state = {k: (v[:V] if k == "transformer.wte.weight" else v) for k, v in W.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" and not k.endswith(".attn.bias")
               and not k.endswith(".attn.masked_bias")]
    assert not missing and not unexpected, (missing, unexpected)
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()  # tied
    return model


def lm_loss(model, batch):
    logits = model(input_ids=batch["tokens"], attention_mask=batch["attn_mask"]).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["targets"].reshape(-1),
                           ignore_index=-1)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([exe, "gpt2", d], check=True)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        W = load_safetensors(os.path.join(d, "weights.safetensors"))
        G = load_safetensors(os.path.join(d, "grads.safetensors"))
        _, _, _, batch = load_batch(os.path.join(d, "batch.txt"))
        res, adam_c = {}, []
        with open(os.path.join(d, "result.txt")) as f:
            for line in f:
                k, *v = line.split()
                if k == "adamw":
                    adam_c.append(float(v[1]))
                else:
                    res[k] = float(v[0])
    V = cfg["vocab_size"]
    ok = True
    rows = W["transformer.wte.weight"].shape[0]
    pad_w = W["transformer.wte.weight"][V:].abs().max().item() if rows > V else 0.0
    pad_g = G["transformer.wte.weight"][V:].abs().max().item() if rows > V else 0.0
    print(f"gpt2: word embedding {rows} rows for {V} tokens; padding weights max {pad_w}, "
          f"gradient max {pad_g} (both must be 0)")
    ok &= rows > V and pad_w == 0.0 and pad_g == 0.0

    model = build(cfg, W)
    loss = lm_loss(model, batch)
    loss.backward()
    rel = abs(res["loss"] - loss.item()) / abs(loss.item())
    print(f"gpt2: loss cloze {res['loss']:.8f} GPT2LMHeadModel {loss.item():.8f} rel {rel:.2e}")
    ok &= rel < 1e-5
    params = dict(model.named_parameters())
    gmax = max(p.grad.abs().max().item() for p in params.values())
    worst, worst_name = 0.0, ""
    for name, p in params.items():
        got = G[name][:V] if name == "transformer.wte.weight" else G[name]
        ref = p.grad
        assert got.shape == ref.shape, (name, got.shape, ref.shape)
        r = (got - ref).abs().max().item() / max(ref.abs().max().item(), 1e-4 * gmax)
        if r > worst:
            worst, worst_name = r, name
        if r >= 1e-4:
            print(f"gpt2: gradient {name}: rel diff {r:.2e}")
            ok = False
    ok &= len(params) == len(G)  # every cloze tensor has its GPT-2 parameter (lm_head is tied)
    print(f"gpt2: {len(params)} gradients, worst rel diff {worst:.2e} ({worst_name})")

    # 10 AdamW steps with torch.optim.AdamW on GPT2LMHeadModel
    model = build(cfg, W)
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": 0.01},
              {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-6)
    adam_t = []
    for step in range(11):
        opt.zero_grad()
        loss = lm_loss(model, batch)
        adam_t.append(loss.item())
        if step == 10:
            break
        loss.backward()
        opt.step()
    worst_step = max(abs(a - b) / abs(b) for a, b in zip(adam_c, adam_t))
    print(f"gpt2: AdamW losses cloze {adam_c[0]:.6f} -> {adam_c[-1]:.6f}, "
          f"GPT2LMHeadModel {adam_t[0]:.6f} -> {adam_t[-1]:.6f}, worst rel diff {worst_step:.2e}")
    ok &= len(adam_c) == 11 and worst_step < 1e-4 and adam_t[-1] < adam_t[0]
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
