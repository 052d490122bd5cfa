#!/usr/bin/env python3
"""Seeds of fuzz_hfdir (called by make_seeds.sh): tiny Hugging Face model
directories written here with the standard library (GPT-2, GPT-1 and BERT
names and shapes, deterministic weights), valid and hostile: config.json
asking for more than model.safetensors holds (vocab_size 1e7 and 1e8, n_embd
65536, n_layer 1e9, as issue 46 found), an integer past the limit, a tensor
listed twice, two tensors sharing bytes, a truncated file, an untied head,
the attention flags cloze refuses, a NaN weight. A seed is a 4-byte
little-endian length n, config.json (n bytes), then model.safetensors.

    hfdir_seeds.py OUT_DIR
"""
import json
import math
import os
import struct
import sys


def tensors_gpt2(V, H, L, P, untied=False):
    t = [("transformer.wte.weight", [V, H]), ("transformer.wpe.weight", [P, H])]
    for l in range(L):
        p = "transformer.h.%d." % l
        t += [(p + "ln_1.weight", [H]), (p + "ln_1.bias", [H]),
              (p + "attn.c_attn.weight", [H, 3 * H]), (p + "attn.c_attn.bias", [3 * H]),
              (p + "attn.c_proj.weight", [H, H]), (p + "attn.c_proj.bias", [H]),
              (p + "ln_2.weight", [H]), (p + "ln_2.bias", [H]),
              (p + "mlp.c_fc.weight", [H, 4 * H]), (p + "mlp.c_fc.bias", [4 * H]),
              (p + "mlp.c_proj.weight", [4 * H, H]), (p + "mlp.c_proj.bias", [H])]
    t += [("transformer.ln_f.weight", [H]), ("transformer.ln_f.bias", [H])]
    if untied:
        t.append(("lm_head.weight", [V, H]))
    return t


def tensors_bert(V, H, L, P, I):
    t = [("bert.embeddings.word_embeddings.weight", [V, H]),
         ("bert.embeddings.position_embeddings.weight", [P, H]),
         ("bert.embeddings.token_type_embeddings.weight", [2, H]),
         ("bert.embeddings.LayerNorm.weight", [H]), ("bert.embeddings.LayerNorm.bias", [H])]
    for l in range(L):
        p = "bert.encoder.layer.%d." % l
        for m in ("query", "key", "value"):
            t += [(p + "attention.self.%s.weight" % m, [H, H]), (p + "attention.self.%s.bias" % m, [H])]
        t += [(p + "attention.output.dense.weight", [H, H]), (p + "attention.output.dense.bias", [H]),
              (p + "attention.output.LayerNorm.weight", [H]), (p + "attention.output.LayerNorm.bias", [H]),
              (p + "intermediate.dense.weight", [I, H]), (p + "intermediate.dense.bias", [I]),
              (p + "output.dense.weight", [H, I]), (p + "output.dense.bias", [H]),
              (p + "output.LayerNorm.weight", [H]), (p + "output.LayerNorm.bias", [H])]
    return t


def safetensors(tensors, nan_at=None, dup=False, overlap=False, cut=0):
    header, data, off = {"__metadata__": {"format": "pt"}}, bytearray(), 0
    for k, (name, shape) in enumerate(tensors):
        n = math.prod(shape)
        vals = [math.sin(0.37 * (k + 1) + 0.11 * i) * 0.1 for i in range(n)]
        if nan_at == k:
            vals[0] = float("nan")
        data += struct.pack("<%df" % n, *vals)
        begin = 0 if overlap and k == 1 else off
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [begin, begin + 4 * n]}
        off += 4 * n
    h = json.dumps(header, separators=(",", ":"))
    if dup:  # the first tensor again, the same name (json.dumps cannot write it)
        first = tensors[0][0]
        h = h[:-1] + ',"%s":%s}' % (first, json.dumps(header[first], separators=(",", ":")))
    h += " " * ((8 - len(h) % 8) % 8)
    b = struct.pack("<Q", len(h)) + h.encode() + bytes(data)
    return b[:len(b) - cut] if cut else b


def gpt2_config(V, H, L, P, **kw):
    c = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
         "n_embd": H, "n_layer": L, "n_head": 2, "n_positions": P, "n_inner": None,
         "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    c.update(kw)
    return json.dumps(c, indent=2)


def seed(out, name, config, st):
    c = config.encode()
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<I", len(c)) + c + st)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    V, H, L, P = 64, 8, 1, 16
    good = safetensors(tensors_gpt2(V, H, L, P))
    seed(out, "gpt2-tiny", gpt2_config(V, H, L, P), good)
    for name, kw in (("hostile-vocab-1e7", {"vocab_size": 10 ** 7}),
                     ("hostile-vocab-1e8", {"vocab_size": 10 ** 8}),
                     ("hostile-n_embd-65536", {"n_embd": 65536}),
                     ("hostile-n_layer-1e9", {"n_layer": 10 ** 9}),
                     ("hostile-n_positions-1e9", {"n_positions": 10 ** 9}),
                     ("n_layer-past-limit", {"n_layer": 10 ** 10}),
                     ("n_head-3", {"n_head": 3}),
                     ("inverse-layer-idx", {"scale_attn_by_inverse_layer_idx": True}),
                     ("no-scale-attn", {"scale_attn_weights": False}),
                     ("untied-no-lm-head", {"tie_word_embeddings": False})):
        cfg = json.loads(gpt2_config(V, H, L, P))
        cfg.update(kw)
        seed(out, name, json.dumps(cfg, indent=2), good)
    seed(out, "untied", gpt2_config(V, H, L, P, tie_word_embeddings=False),
         safetensors(tensors_gpt2(V, H, L, P, untied=True)))
    seed(out, "duplicate-tensor", gpt2_config(V, H, L, P), safetensors(tensors_gpt2(V, H, L, P), dup=True))
    seed(out, "shared-bytes", gpt2_config(V, H, L, P), safetensors(tensors_gpt2(V, H, L, P), overlap=True))
    seed(out, "truncated", gpt2_config(V, H, L, P), safetensors(tensors_gpt2(V, H, L, P), cut=100))
    seed(out, "nan", gpt2_config(V, H, L, P), safetensors(tensors_gpt2(V, H, L, P), nan_at=2))
    gpt1 = {"architectures": ["OpenAIGPTLMHeadModel"], "model_type": "openai-gpt", "vocab_size": V,
            "n_embd": H, "n_layer": L, "n_head": 2, "n_positions": P, "afn": "gelu"}
    t1 = [(n.replace("wte", "tokens_embed").replace("wpe", "positions_embed"), s)
          for n, s in tensors_gpt2(V, H, L, P) if "ln_f" not in n]
    seed(out, "openai-gpt-tiny", json.dumps(gpt1, indent=2), safetensors(t1))
    bert = {"architectures": ["BertForPreTraining"], "model_type": "bert", "vocab_size": V,
            "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": 2,
            "intermediate_size": 16, "max_position_embeddings": P, "type_vocab_size": 2}
    seed(out, "bert-tiny", json.dumps(bert, indent=2), safetensors(tensors_bert(V, H, L, P, 16)))
    seed(out, "bert-hostile-intermediate", json.dumps(dict(bert, intermediate_size=10 ** 9), indent=2),
         safetensors(tensors_bert(V, H, L, P, 16)))
    seed(out, "bert-untied", json.dumps(dict(bert, tie_word_embeddings=False), indent=2),
         safetensors(tensors_bert(V, H, L, P, 16)))


if __name__ == "__main__":
    main()
