#!/usr/bin/env python3
"""cloze-generate against transformers' generate() and BertForMaskedLM.

Usage (run by tests/scripts/test_generate_hf.sh, which makes the random
models with one call and runs every comparison with a second, CHECKS
holding one command below per line, its fields separated by tabs: each
start of the interpreter costs seconds):
  test_generate_hf.py make-random VOCAB gpt2|gpt1 DIR [gpt2|gpt1 DIR]...
  test_generate_hf.py checks CHECKS
The commands:
  make-random DIR VOCAB gpt2|gpt1|bert
      a GPT2LMHeadModel, OpenAIGPTLMHeadModel or BertForPreTraining (width
      48, 2 layers, 3 heads, 64 positions) with weights drawn at std 0.3
      (not 0.02, so that the greedy continuation is no near-tie and varies,
      and fill-mask's probabilities are far from uniform), LayerNorm and
      biases moved off 1 / 0, saved with save_pretrained
  greedy DIR IDS_FILE N DISTINCT
      IDS_FILE: cloze-generate --ids output (one line: prompt then new
      tokens); the first len - N ids are the prompt. transformers'
      generate(do_sample=False, max_new_tokens=N) on the same prompt must
      give the same ids, with at least DISTINCT different new tokens (3 for
      the random models: not one repeated token).
  decode DIR IDS_FILE TEXT_FILE
      TEXT_FILE (cloze-generate's text, then a newline) is byte for byte
      AutoTokenizer(DIR).decode of the ids
  prompt DIR IDS_FILE N TEXT
      AutoTokenizer(DIR) on TEXT gives the prompt ids cloze-generate used
  fill-mask DIR TEXT OUT_FILE K
      OUT_FILE: cloze-generate fill-mask --ids output (lines "prob id word");
      BertForMaskedLM(DIR) on BertTokenizer(TEXT): the softmax's top-K ids
      equal cloze's and each probability within 1e-5 and 1e-4 relative.
transformers runs in float32, as cloze does.
"""
import sys

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, BertConfig,
                          BertForMaskedLM, BertForPreTraining, GPT2Config, GPT2LMHeadModel,
                          OpenAIGPTConfig, OpenAIGPTLMHeadModel)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def make_random(out, vocab, kind):
    torch.manual_seed({"gpt2": 4242, "gpt1": 4243, "bert": 4244}[kind])
    if kind == "bert":
        conf = BertConfig(vocab_size=vocab, hidden_size=48, num_hidden_layers=2,
                          num_attention_heads=3, intermediate_size=96,
                          max_position_embeddings=64, initializer_range=0.3)
        model = BertForPreTraining(conf)
    elif kind == "gpt2":
        conf = GPT2Config(vocab_size=vocab, n_embd=48, n_layer=2, n_head=3, n_positions=64,
                          initializer_range=0.3)
        model = GPT2LMHeadModel(conf)
    else:
        conf = OpenAIGPTConfig(vocab_size=vocab, n_embd=48, n_layer=2, n_head=3, n_positions=64,
                               initializer_range=0.3)
        model = OpenAIGPTLMHeadModel(conf)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name or "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(out, safe_serialization=True)


def read_ids(path):
    lines = [l.split() for l in open(path) if l.strip()]
    if len(lines) != 1:
        fail(f"{path}: {len(lines)} lines of ids, expected 1")
    return [int(t) for t in lines[0]]


def greedy(d, ids_file, n, distinct):
    ids = read_ids(ids_file)
    prompt, ours = ids[:-n], ids[-n:]
    model = AutoModelForCausalLM.from_pretrained(d).float().eval()
    model.generation_config.eos_token_id = None  # cloze ran with --ignore-eos
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=n,
                             min_new_tokens=n, attention_mask=torch.ones(1, len(prompt),
                                                                         dtype=torch.long))
    theirs = out[0, len(prompt):].tolist()
    print(f"{d}: prompt {len(prompt)} ids, cloze {ours[:12]}..., transformers {theirs[:12]}...")
    if ours != theirs:
        first = next(i for i in range(n) if i >= len(theirs) or ours[i] != theirs[i])
        fail(f"{d}: greedy ids differ from transformers' generate() at new token {first}")
    if len(set(ours)) < distinct:
        fail(f"{d}: the continuation has {len(set(ours))} distinct token(s): too weak a check")
    print(f"{d}: {n} greedy tokens equal transformers' ({len(set(ours))} distinct)")


def prompt_check(d, ids_file, n, text):
    ids = read_ids(ids_file)
    theirs = AutoTokenizer.from_pretrained(d)(text)["input_ids"]
    if ids[:-n] != theirs:
        fail(f"{d}: cloze's prompt ids {ids[:-n]} differ from AutoTokenizer's {theirs}")
    print(f"{d}: the prompt's {len(theirs)} ids equal AutoTokenizer's")


def decode(d, ids_file, text_file):
    ids = read_ids(ids_file)
    theirs = AutoTokenizer.from_pretrained(d).decode(ids).encode("utf-8")
    ours = open(text_file, "rb").read()
    if ours != theirs + b"\n":
        fail(f"{text_file}: cloze's text {ours[:60]!r}... differs from AutoTokenizer's decode "
             f"{theirs[:60]!r}...")
    print(f"{d}: the text ({len(theirs)} bytes) is AutoTokenizer's decode of the ids")


def fill_mask(d, text, out_file, k):
    rows = [l.split() for l in open(out_file) if l.strip() and not l.startswith("[MASK]")]
    tok = AutoTokenizer.from_pretrained(d)
    model = BertForMaskedLM.from_pretrained(d).float().eval()
    enc = tok(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[0]
    masks = (enc["input_ids"][0] == tok.mask_token_id).nonzero().flatten().tolist()
    if len(rows) != k * len(masks):
        fail(f"{out_file}: {len(rows)} rows, expected {k} per [MASK] x {len(masks)}")
    worst = worst_rel = 0.0
    for m_i, pos in enumerate(masks):
        p = torch.softmax(logits[pos].double(), dim=-1)
        top = torch.topk(p, k)
        for j in range(k):
            prob, tid = float(rows[m_i * k + j][0]), int(rows[m_i * k + j][1])
            if tid != int(top.indices[j]):
                fail(f"[MASK] {m_i + 1} rank {j + 1}: cloze id {tid}, transformers "
                     f"{int(top.indices[j])}")
            diff = abs(prob - float(top.values[j]))
            worst = max(worst, diff)
            worst_rel = max(worst_rel, diff / float(top.values[j]))
    # within 1e-5, and within 1e-4 relative: a young model's probabilities
    # are about 1e-3, where 1e-5 alone would let a 1 % error through
    # (cloze prints 9 digits with --ids; float32 sums err by ~1e-6 relative)
    if worst > 1e-5 or worst_rel > 1e-4:
        fail(f"fill-mask probabilities differ from BertForMaskedLM's by {worst:.2e} "
             f"({worst_rel:.2e} relative)")
    print(f"fill-mask: top-{k} ids of {len(masks)} mask(s) equal BertForMaskedLM's, "
          f"probabilities within {worst:.1e} ({worst_rel:.1e} relative)")


def run(args):
    cmd = args[0]
    if cmd == "greedy":
        greedy(args[1], args[2], int(args[3]), int(args[4]))
    elif cmd == "decode":
        decode(args[1], args[2], args[3])
    elif cmd == "prompt":
        prompt_check(args[1], args[2], int(args[3]), args[4])
    elif cmd == "fill-mask":
        fill_mask(args[1], args[2], args[3], int(args[4]))
    else:
        fail(f"unknown command {cmd}")


def main():
    if sys.argv[1] == "make-random":
        vocab, rest = int(sys.argv[2]), sys.argv[3:]
        for kind, d in zip(rest[0::2], rest[1::2]):
            make_random(d, vocab, kind)
    elif sys.argv[1] == "checks":
        for line in open(sys.argv[2]):
            if line.strip():
                run(line.rstrip("\n").split("\t"))
    else:
        run(sys.argv[1:])


if __name__ == "__main__":
    main()
