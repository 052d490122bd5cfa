#!/usr/bin/env python3
"""cloze-generate against transformers' generate() and BertForMaskedLM.

Usage (run by tests/scripts/test_generate_hf.sh):
  test_generate_hf.py make-random DIR VOCAB gpt2|gpt1
      a GPT2LMHeadModel or OpenAIGPTLMHeadModel (n_embd 48, 2 layers, 3
      heads, 64 positions) with weights drawn at std 0.3 (not 0.02, so that
      the greedy continuation is no near-tie and varies), LayerNorm and
      biases moved off 1 / 0, saved with save_pretrained
  test_generate_hf.py greedy DIR IDS_FILE N DISTINCT
      IDS_FILE: cloze-generate --ids output (one line: prompt then new
      tokens); the first len - N ids are the prompt. transformers'
      generate(do_sample=False, max_new_tokens=N) on the same prompt must
      give the same ids, with at least DISTINCT different new tokens (3 for
      the random models: not one repeated token).
  test_generate_hf.py decode DIR IDS_FILE TEXT_FILE
      TEXT_FILE (cloze-generate's text, then a newline) is byte for byte
      AutoTokenizer(DIR).decode of the ids
  test_generate_hf.py prompt DIR IDS_FILE N TEXT
      AutoTokenizer(DIR) on TEXT gives the prompt ids cloze-generate used
  test_generate_hf.py fill-mask DIR TEXT OUT_FILE K
      OUT_FILE: cloze-generate fill-mask --ids output (lines "prob id word");
      BertForMaskedLM(DIR) on BertTokenizer(TEXT): the softmax's top-K ids
      equal cloze's and each probability within 1e-5.
transformers runs in float32, as cloze does.
"""
import sys

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, BertForMaskedLM,
                          GPT2Config, GPT2LMHeadModel, OpenAIGPTConfig,
                          OpenAIGPTLMHeadModel)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def make_random(out, vocab, kind):
    torch.manual_seed(4242 if kind == "gpt2" else 4243)
    if kind == "gpt2":
        conf = GPT2Config(vocab_size=vocab, n_embd=48, n_layer=2, n_head=3, n_positions=64,
                          initializer_range=0.3)
        model = GPT2LMHeadModel(conf)
    else:
        conf = OpenAIGPTConfig(vocab_size=vocab, n_embd=48, n_layer=2, n_head=3, n_positions=64,
                               initializer_range=0.3)
        model = OpenAIGPTLMHeadModel(conf)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
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
    worst = 0.0
    for m_i, pos in enumerate(masks):
        p = torch.softmax(logits[pos].double(), dim=-1)
        top = torch.topk(p, k)
        for j in range(k):
            prob, tid = float(rows[m_i * k + j][0]), int(rows[m_i * k + j][1])
            if tid != int(top.indices[j]):
                fail(f"[MASK] {m_i + 1} rank {j + 1}: cloze id {tid}, transformers "
                     f"{int(top.indices[j])}")
            worst = max(worst, abs(prob - float(top.values[j])))
    # cloze prints 6 decimals: the printing adds up to 5e-7
    if worst > 1e-5:
        fail(f"fill-mask probabilities differ from BertForMaskedLM's by {worst:.2e} > 1e-5")
    print(f"fill-mask: top-{k} ids of {len(masks)} mask(s) equal BertForMaskedLM's, "
          f"probabilities within {worst:.1e}")


def main():
    cmd = sys.argv[1]
    if cmd == "make-random":
        make_random(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "greedy":
        greedy(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "decode":
        decode(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "prompt":
        prompt_check(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif cmd == "fill-mask":
        fill_mask(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
