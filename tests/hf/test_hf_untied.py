#!/usr/bin/env python3
"""GPT-2 with an untied LM head, and the attention flags cloze has not
(issue 46).

Usage (run by tests/scripts/test_hf_untied.sh):
  test_hf_untied.py make DIR KIND
      a GPT2LMHeadModel (vocab 300, n_embd 32, 2 layers, 2 heads, 64
      positions) with random weights saved by transformers, with a 300-token
      vocab.json and merges.txt; KIND untied (tie_word_embeddings = false,
      lm_head.weight drawn apart from the word embedding, std 0.5),
      inv_layer_idx (scale_attn_by_inverse_layer_idx = true) or
      no_scale (scale_attn_weights = false)
  test_hf_untied.py compare WORK DUMP
      WORK/untied, its import WORK/untied.lz4 and the export of that import
      WORK/export against cloze (tests/hf_dump.c):
  * import: cloze's hidden states of every layer and its LM loss (computed
    by cloze's own head) within 1e-5 of GPT2LMHeadModel's on a batch;
  * export: GPT2LMHeadModel loads it with no missing, unexpected or
    mismatched key, config.json says tie_word_embeddings = false, its
    lm_head is not its word embedding, and its logits equal the original
    model's within 1e-5 relative; cloze's final hidden states times the
    exported lm_head.weight give those logits too.
transformers runs in float64 (the loaded float32 weights widened).
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

from hf_checks import TOL, check, failures  # noqa: E402 (before transformers)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from model_reference import load_safetensors  # noqa: E402

VOCAB = 300


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def make(out, kind):
    torch.manual_seed(4646)
    kw = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    if kind == "untied":
        kw["tie_word_embeddings"] = False
    elif kind == "inv_layer_idx":
        kw["scale_attn_by_inverse_layer_idx"] = True
    elif kind == "no_scale":
        kw["scale_attn_weights"] = False
    else:
        raise SystemExit("unknown kind " + kind)
    model = GPT2LMHeadModel(GPT2Config(**kw))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
        if kind == "untied":
            model.lm_head.weight.normal_(0.0, 0.5)
    model.save_pretrained(out, safe_serialization=True)
    # a byte-level BPE vocabulary of VOCAB tokens, no merges: what export
    # needs to write the tokenizer files (its ids are not what is compared)
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump({"t%d" % i: i for i in range(VOCAB)}, f)
    with open(os.path.join(out, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")


def load(d, label):
    model, info = GPT2LMHeadModel.from_pretrained(d, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k != "error_msgs"}
    check(not bad and not info.get("error_msgs"),
          f"{label}: GPT2LMHeadModel.from_pretrained loads with no missing, unexpected or "
          f"mismatched key {bad if bad else ''}")
    return model.double().eval()


def forward(model, tokens, targets):
    with torch.no_grad():
        out = model(input_ids=torch.tensor(tokens), output_hidden_states=True)
    logits = out.logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(targets).reshape(-1),
                           ignore_index=-1).item()
    return [h.numpy() for h in out.hidden_states], logits.numpy(), loss


def compare(work, dump):
    rng = np.random.default_rng(46)
    B, T = 2, 16
    tokens = rng.integers(0, VOCAB, size=(B, T), dtype=np.int64)
    targets = np.full((B, T), -1, dtype=np.int64)
    targets[:, :-1] = tokens[:, 1:]
    batch = os.path.join(work, "batch.txt")
    with open(batch, "w") as f:
        f.write(f"shape {B} {T} 0\n")
        f.write("tokens " + " ".join(str(int(x)) for x in tokens.reshape(-1)) + "\n")
        f.write("attn_mask " + " ".join("1" for _ in range(B * T)) + "\n")
        f.write("targets " + " ".join(str(int(x)) for x in targets.reshape(-1)) + "\n")
    out = os.path.join(work, "dump")
    os.makedirs(out, exist_ok=True)
    subprocess.run([dump, os.path.join(work, "untied.lz4"), batch, out], check=True)
    hidden = {k: v.numpy() for k, v in load_safetensors(os.path.join(out, "hidden.safetensors")).items()}
    res = dict(line.split() for line in open(os.path.join(out, "result.txt")))

    orig = load(os.path.join(work, "untied"), "original")
    check(not orig.config.tie_word_embeddings and
          not torch.equal(orig.lm_head.weight, orig.transformer.wte.weight),
          "original: an untied head (tie_word_embeddings false, lm_head != wte)")
    hf_hidden, hf_logits, hf_loss = forward(orig, tokens, targets)
    worst = max(rel(hidden[f"hidden.{k}"], hf_hidden[k].reshape(B * T, -1)) for k in range(len(hf_hidden)))
    check(worst < TOL, f"import: hidden states of {len(hf_hidden)} layers, worst rel diff {worst:.2e}")
    lm = float(res["lm"])
    r = abs(lm - hf_loss) / abs(hf_loss)
    check(r < TOL, f"import: LM loss cloze {lm:.7f} GPT2LMHeadModel {hf_loss:.7f} rel {r:.2e} "
          "(cloze's own head)")

    export = os.path.join(work, "export")
    with open(os.path.join(export, "config.json")) as f:
        conf = json.load(f)
    check(conf.get("tie_word_embeddings") is False and conf.get("scale_attn_weights") is True and
          conf.get("scale_attn_by_inverse_layer_idx") is False,
          "export: config.json says tie_word_embeddings false, scale_attn_weights true, "
          "scale_attn_by_inverse_layer_idx false")
    exp = load(export, "export")
    check(not torch.equal(exp.lm_head.weight, exp.transformer.wte.weight),
          "export: GPT2LMHeadModel's lm_head is its own, not the word embedding")
    _, exp_logits, exp_loss = forward(exp, tokens, targets)
    r = rel(exp_logits, hf_logits)
    check(r < TOL, f"export: logits [{B * T} x {VOCAB}] equal the original's, rel diff {r:.2e}")
    head = load_safetensors(os.path.join(export, "model.safetensors"))["lm_head.weight"].numpy()
    L = conf["n_layer"]
    r = rel(hidden[f"hidden.{L}"] @ head.T, hf_logits.reshape(B * T, -1))
    check(head.shape == (VOCAB, 32) and r < TOL,
          f"export: cloze's final states times the exported lm_head {head.shape}: the original's "
          f"logits, rel diff {r:.2e}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) != 4 or sys.argv[1] != "compare":
        print(__doc__)
        return 2
    compare(sys.argv[2], sys.argv[3])
    print("FAILED: " + "; ".join(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
