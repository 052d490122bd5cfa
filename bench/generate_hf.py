#!/usr/bin/env python3
"""The transformers side of bench/generate_vs_hf.sh.

  generate_hf.py make DIR
      a GPT2LMHeadModel of GPT-2 small's shape (GPT2Config's defaults: 12
      layers, 768 wide, 12 heads, 1024 positions, 50257 tokens; random
      weights, seed 0), saved with save_pretrained (model.safetensors)
  generate_hf.py run DIR BATCH NEW THREADS PROMPT_IDS
      generate(do_sample=False) of NEW tokens for BATCH copies of the
      prompt, in float32 on THREADS threads, with the key-value cache
      (use_cache, the default), after a warm-up of 2 tokens; prints
      "tokens/s X" (BATCH x NEW / the seconds of generate()) and the first
      sequence's ids
"""
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    if sys.argv[1] == "make":
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config()).save_pretrained(sys.argv[2], safe_serialization=True)
        return
    d, b, n, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    model = GPT2LMHeadModel.from_pretrained(d).float().eval()
    model.generation_config.eos_token_id = None  # cloze runs with --ignore-eos
    model.generation_config.pad_token_id = 0
    prompt = torch.tensor([[int(t) for t in sys.argv[6].split()]] * b)
    mask = torch.ones_like(prompt)
    with torch.no_grad():
        model.generate(prompt, attention_mask=mask, do_sample=False, max_new_tokens=2)
        t = time.perf_counter()
        out = model.generate(prompt, attention_mask=mask, do_sample=False, max_new_tokens=n,
                             min_new_tokens=n)
        s = time.perf_counter() - t
    print(f"tokens/s {b * n / s:.2f}")
    print(" ".join(str(i) for i in out[0].tolist()))


if __name__ == "__main__":
    main()
