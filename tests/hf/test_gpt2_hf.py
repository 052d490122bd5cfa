#!/usr/bin/env python3
"""GPT-2's layout and transformers' GPT2LMHeadModel, both ways.

Usage (run by tests/scripts/test_gpt2_hf.sh):
  test_gpt2_hf.py make-random DIR VOCAB
      a GPT2LMHeadModel (n_embd 48, 2 layers, 3 heads, 64 positions) with
      random weights, LayerNorm gains/biases and every bias moved off 1 / 0,
      saved with save_pretrained (model.safetensors)
  test_gpt2_hf.py compare WORK DUMP PREP CKPT VOCAB MERGES TEXT
      WORK/export (cloze-ckpt export-hf of CKPT) and WORK/random +
      WORK/random.lz4 (its import) against cloze (tests/hf_dump.c):
  * export: GPT2LMHeadModel and AutoModelForCausalLM load it with no missing,
    unexpected or mismatched key; config.json carries GPT2Config's fields;
    AutoTokenizer (GPT2Tokenizer) gives cloze-prep's ids; on a batch (one
    sequence padded) every layer's hidden states, the logits and the loss
    equal cloze's within 1e-5 relative (max |a - b| / max |b|; cloze's
    logits are its final hidden states times its word embedding's real rows,
    the tied head);
  * import: cloze's hidden states of every layer and loss within 1e-5 of
    GPT2LMHeadModel's on the same batch.
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
from transformers import (AutoModelForCausalLM, AutoTokenizer, GPT2Config,  # noqa: E402
                          GPT2LMHeadModel)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from model_reference import load_safetensors  # noqa: E402


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def make_random(out, vocab):
    torch.manual_seed(20240)
    conf = GPT2Config(vocab_size=vocab, n_embd=48, n_layer=2, n_head=3, n_positions=64)
    model = GPT2LMHeadModel(conf)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(out, safe_serialization=True)


def load(cls, d, label):
    model, info = cls.from_pretrained(d, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k != "error_msgs"}
    check(not bad and not info.get("error_msgs"),
          f"{label}: {cls.__name__}.from_pretrained loads with no missing, unexpected or "
          f"mismatched key {bad if bad else ''}")
    return model.double().eval()


def make_batch(ids_lines, T, vocab):
    """3 sequences of T tokens cut from the tokenized text; sequence 1 has
    its last 7 tokens padded (attention mask 0, no loss)."""
    flat = [t for l in ids_lines for t in l if t < vocab]
    B = 3
    assert len(flat) >= B * (T + 1), "not enough text for a batch"
    tokens = np.array(flat[:B * T], dtype=np.int64).reshape(B, T)
    mask = np.ones((B, T), dtype=np.int64)
    mask[1, T - 7:] = 0
    tokens[1, T - 7:] = 0
    targets = np.full((B, T), -1, dtype=np.int64)
    targets[:, :-1] = tokens[:, 1:]
    targets[mask == 0] = -1
    targets[1, T - 8] = -1  # the last real token of the padded sequence predicts nothing
    return tokens, mask, targets


def write_batch(path, tokens, mask, targets):
    B, T = tokens.shape
    with open(path, "w") as f:
        f.write(f"shape {B} {T} 0\n")
        for name, a in (("tokens", tokens), ("attn_mask", mask), ("targets", targets)):
            f.write(name + " " + " ".join(str(int(x)) for x in a.reshape(-1)) + "\n")


def run_dump(dump, ckpt, batch_path, out):
    os.makedirs(out, exist_ok=True)
    subprocess.run([dump, ckpt, batch_path, out], check=True)
    hidden = {k: v.numpy() for k, v in load_safetensors(os.path.join(out, "hidden.safetensors")).items()}
    res = {}
    with open(os.path.join(out, "result.txt")) as f:
        for line in f:
            k, v = line.split()
            res[k] = float(v)
    return hidden, res


def hf_forward(model, tokens, mask, targets):
    with torch.no_grad():
        out = model(input_ids=torch.tensor(tokens), attention_mask=torch.tensor(mask),
                    output_hidden_states=True)
    logits = out.logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(targets).reshape(-1),
                           ignore_index=-1).item()
    return [h.numpy() for h in out.hidden_states], logits.numpy(), loss


def compare_states(label, hidden, hf_hidden, mask):
    """Every layer, at the real (unpadded) positions: padded queries attend
    only to masked keys, which transformers and cloze weight differently
    (finfo.min vs -10000); nothing real reads them."""
    real = mask.reshape(-1) == 1
    worst = max(rel(hidden[f"hidden.{k}"][real], hf_hidden[k].reshape(-1, hf_hidden[k].shape[-1])[real])
                for k in range(len(hf_hidden)))
    check(len(hidden) == len(hf_hidden) and worst < TOL,
          f"{label}: hidden states of {len(hf_hidden)} layers (the last after ln_f), worst rel "
          f"diff {worst:.2e}")


def compare(work, dump, prep, ckpt, vocab, merges, text):
    export = os.path.join(work, "export")
    with open(os.path.join(export, "config.json")) as f:
        conf = json.load(f)
    want = ("n_embd", "n_layer", "n_head", "n_positions", "layer_norm_epsilon", "vocab_size")
    check(conf.get("model_type") == "gpt2" and conf.get("architectures") == ["GPT2LMHeadModel"]
          and all(k in conf for k in want),
          f"export: config.json is a GPT2Config ({', '.join(f'{k} {conf.get(k)}' for k in want)})")
    V = conf["vocab_size"]
    model = load(GPT2LMHeadModel, export, "export")
    auto = load(AutoModelForCausalLM, export, "export")
    check(type(auto).__name__ == "GPT2LMHeadModel", f"export: AutoModelForCausalLM gives {type(auto).__name__}")
    check(model.transformer.wte.weight.shape[0] == V,
          f"export: word embedding {tuple(model.transformer.wte.weight.shape)}, vocab_size {V} rows")

    tok = AutoTokenizer.from_pretrained(export)
    with open(text, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()][:200]
    out = subprocess.run([prep, "tokenize", "--vocab", vocab, "--merges", merges],
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout
    ours = [[int(x) for x in l.split()] for l in out.split("\n")[:len(lines)]]
    theirs = tok(lines, add_special_tokens=False)["input_ids"]
    check(type(tok).__name__.startswith("GPT2Tokenizer") and ours == theirs,
          f"export: {type(tok).__name__} gives cloze-prep's ids on {len(lines)} lines")

    T = 32
    tokens, mask, targets = make_batch(ours, T, V)
    batch = os.path.join(work, "batch.txt")
    write_batch(batch, tokens, mask, targets)
    hidden, res = run_dump(dump, ckpt, batch, os.path.join(work, "dump-export"))
    hf_hidden, hf_logits, hf_loss = hf_forward(model, tokens, mask, targets)
    compare_states("export", hidden, hf_hidden, mask)
    wte = load_safetensors(os.path.join(export, "model.safetensors"))["transformer.wte.weight"].numpy()
    L = conf["n_layer"]
    logits = hidden[f"hidden.{L}"] @ wte.T  # cloze's tied head on cloze's final states
    real = mask.reshape(-1) == 1
    r = rel(logits[real], hf_logits.reshape(-1, V)[real])
    check(r < TOL, f"export: logits [{int(real.sum())} x {V}] rel diff {r:.2e}")
    r = abs(res["lm"] - hf_loss) / abs(hf_loss)
    check(r < TOL, f"export: loss cloze {res['lm']:.7f} GPT2LMHeadModel {hf_loss:.7f} rel {r:.2e}")

    # import: a random GPT2LMHeadModel saved by transformers
    rnd = os.path.join(work, "random")
    model = load(GPT2LMHeadModel, rnd, "random")
    Vr = model.config.vocab_size
    tokens, mask, targets = make_batch(ours, T, Vr)
    write_batch(batch, tokens, mask, targets)
    hidden, res = run_dump(dump, os.path.join(work, "random.lz4"), batch, os.path.join(work, "dump-import"))
    hf_hidden, _, hf_loss = hf_forward(model, tokens, mask, targets)
    compare_states("import", hidden, hf_hidden, mask)
    r = abs(res["lm"] - hf_loss) / abs(hf_loss)
    check(r < TOL, f"import: loss cloze {res['lm']:.7f} GPT2LMHeadModel {hf_loss:.7f} rel {r:.2e}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "make-random":
        make_random(sys.argv[2], int(sys.argv[3]))
        return 0
    if len(sys.argv) != 9 or sys.argv[1] != "compare":
        print(__doc__)
        return 2
    compare(*sys.argv[2:])
    print("FAILED: " + "; ".join(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
