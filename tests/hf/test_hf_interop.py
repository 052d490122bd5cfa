#!/usr/bin/env python3
"""Hugging Face interoperability, checked with transformers itself.

Usage: test_hf_interop.py WORK   (run by tests/scripts/test_hf_interop.sh,
which trains the models, exports and imports them with cloze-ckpt and
writes WORK/cases.json)

For every exported cloze checkpoint:
  * AutoModelForPreTraining / AutoModelForCausalLM load the export with no
    missing, unexpected or mismatched keys;
  * on the same batch, every layer's hidden states of transformers and of
    cloze (tests/hf_dump.c) agree to 1e-5 relative (max |a - b| / max |b|),
    the heads' logits of transformers agree to 1e-5 relative with the same
    heads computed in float64 from cloze's last hidden states and weights,
    and the losses agree to 1e-5 relative;
  * AutoTokenizer on the export gives the ids of `cloze-prep tokenize`,
    line by line (no special tokens on either side; for WordPiece
    transformers gets the line after cloze-prep's documented BERT-mode
    normalisation, which collapses runs of spaces and drops control
    characters before the tokenizer; GPT-2 BPE gets the line as it is,
    since cloze-prep's GPT mode keeps every byte, docs/formats.md).
For the imported all-MiniLM-L6-v2 (a bare BertModel): cloze's hidden states
of every layer within 1e-5 relative of BertModel's.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

from hf_checks import TOL, check, failures  # noqa: E402 (before transformers)
from transformers import (AutoModelForCausalLM, AutoModelForPreTraining,  # noqa: E402
                          AutoModelForSequenceClassification, AutoModelForTokenClassification,
                          AutoTokenizer, BertModel)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from model_reference import load_safetensors as reference_load  # noqa: E402

def load_safetensors(path):
    """F32 tensors of a safetensors file as float64 numpy arrays (the reader
    of tests/reference/model_reference.py)."""
    return {k: v.numpy() for k, v in reference_load(path).items()}


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


SPACES = set("\r\t\v\f\u00a0\u1680\u2028\u2029\u202f\u205f\u3000") | {chr(c) for c in range(0x2000, 0x200B)}


def cloze_normalise(line):
    """cloze-prep's normalisation of one line (docs/formats.md, steps 2-4),
    which `cloze-prep tokenize` applies before its tokenizer: Unicode spaces
    become ' ', control characters and the BOM are dropped, runs of spaces
    collapse, the line is trimmed. transformers gets the same text."""
    out = []
    for ch in line:
        o = ord(ch)
        if ch in SPACES:
            ch = " "
        elif (o < 0x20 and ch != "\n") or o == 0x7F or 0x80 <= o <= 0x9F or o == 0xFEFF:
            continue
        if ch == " " and out and out[-1] == " ":
            continue
        out.append(ch)
    return "".join(out).strip(" ")


def cloze_tokenize(prep, vocab, merges, lines):
    cmd = [prep, "tokenize", "--vocab", vocab] + (["--merges", merges] if merges else [])
    out = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout
    return [[int(x) for x in l.split()] for l in out.split("\n")[:len(lines)]]


def check_tokenizer(label, prep, export_dir, vocab, merges, lines):
    tok = AutoTokenizer.from_pretrained(export_dir)
    ours = cloze_tokenize(prep, vocab, merges, lines)
    text = lines if merges else [cloze_normalise(l) for l in lines]  # GPT mode: bytes as they are
    theirs = tok(text, add_special_tokens=False)["input_ids"]
    bad = [i for i in range(len(lines)) if ours[i] != theirs[i]]
    n_tok = sum(len(x) for x in ours)
    check(not bad, f"{label}: {type(tok).__name__} on the export gives cloze-prep's ids for "
          f"{len(lines)} lines ({n_tok} tokens)")
    for i in bad[:3]:
        print(f"     line {i}: {lines[i][:80]!r}\n       cloze {ours[i][:20]}\n       hf    {theirs[i][:20]}")
    return ours


def make_batch(arch, ids_lines, T, P, cls_id, sep_id, pad_id, vocab_size, seed):
    """B = 4 sequences of T tokens from tokenized lines: BERT [CLS] a [SEP] b
    [SEP] (sequence 1 and 3 padded), P MLM slots at distinct positions; GPT
    plain windows (sequence 1 padded)."""
    rng = np.random.default_rng(seed)
    B = 4
    flat = [t for l in ids_lines for t in l if t < vocab_size]
    tokens = np.full((B, T), pad_id, dtype=np.int64)
    segments = np.zeros((B, T), dtype=np.int64)
    mask = np.zeros((B, T), dtype=np.int64)
    pos = np.zeros((B, P), dtype=np.int64)
    lab = np.zeros((B, P), dtype=np.int64)
    nsp = np.array([0, 1, 1, 0])
    for s in range(B):
        length = T if s % 2 == 0 else T - 5
        start = int(rng.integers(0, max(1, len(flat) - T)))
        body = flat[start:start + T]
        if arch == "bert":
            half = (length - 3) // 2
            a, b = body[:half], body[half:length - 3]
            seq = [cls_id] + a + [sep_id] + b + [sep_id]
            tokens[s, :len(seq)] = seq
            segments[s, half + 2:len(seq)] = 1
            choice = rng.choice(np.arange(1, len(seq) - 1), size=P, replace=False)
            pos[s] = np.sort(choice)
            lab[s] = rng.integers(0, vocab_size, size=P)
        else:
            tokens[s, :length] = body[:length]
        mask[s, :length] = 1
    return dict(tokens=tokens, segments=segments, attn_mask=mask, mlm_positions=pos,
                mlm_labels=lab, nsp_labels=nsp, B=B, T=T, P=P)


def write_batch(path, arch, b):
    B, T, P = b["B"], b["T"], b["P"]
    tokens, mask = b["tokens"], b["attn_mask"]
    targets = np.full((B, T), -1, dtype=np.int64)
    for s in range(B):
        n = int(mask[s].sum())
        targets[s, :n - 1] = tokens[s, 1:n]
    with open(path, "w") as f:
        f.write(f"shape {B} {T} {P if arch == 'bert' else 0}\n")
        for k, v in (("tokens", tokens), ("attn_mask", mask), ("segments", b["segments"]),
                     ("mlm_positions", b["mlm_positions"]), ("mlm_labels", b["mlm_labels"]),
                     ("mlm_weights", np.ones((B, P), dtype=np.int64)),
                     ("nsp_labels", b["nsp_labels"]), ("targets", targets)):
            f.write(k + " " + " ".join(str(int(x)) for x in np.asarray(v).ravel()) + "\n")
    return targets


def run_dump(dump, ckpt, batch_path, out):
    os.makedirs(out, exist_ok=True)
    subprocess.run([dump, ckpt, batch_path, out], check=True)
    hidden = load_safetensors(os.path.join(out, "hidden.safetensors"))
    result = {}
    for line in open(os.path.join(out, "result.txt")):
        k, v = line.split()
        result[k] = float(v)
    return hidden, result


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def load_export(cls, export_dir, label):
    """cls.from_pretrained(export_dir) in eval mode, checked to load every
    tensor: no missing, unexpected or mismatched keys."""
    model, info = cls.from_pretrained(export_dir, output_loading_info=True)
    model.eval()
    keys_ok = not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    check(keys_ok, f"{label}: {type(model).__name__} loads the export with no missing, "
          f"unexpected or mismatched keys")
    if not keys_ok:
        print("     ", info)
    return model


def check_export(case, dump, prep, work):
    label, arch, export_dir = case["label"], case["arch"], case["export"]
    model = load_export(AutoModelForPreTraining if arch == "bert" else AutoModelForCausalLM,
                        export_dir, label)
    lines = [l.rstrip("\n") for l in open(case["text"], encoding="utf-8") if l.strip()][:case["lines"]]
    ids = check_tokenizer(label, prep, export_dir, case["vocab"], case.get("merges"), lines)

    cfg = json.load(open(os.path.join(export_dir, "config.json")))
    V = cfg["vocab_size"]
    T = min(32, cfg.get("max_position_embeddings", cfg.get("n_positions", 32)))
    b = make_batch(arch, ids, T, 4, case.get("cls", 0), case.get("sep", 0), case.get("pad", 0), V, 7)
    bpath = os.path.join(work, label + ".batch")
    targets = write_batch(bpath, arch, b)
    hidden, res = run_dump(dump, case["ckpt"], bpath, os.path.join(work, label + ".dump"))
    w = load_safetensors(os.path.join(export_dir, "model.safetensors"))
    B, T = b["B"], b["T"]
    tokens = torch.tensor(b["tokens"])
    mask = torch.tensor(b["attn_mask"])
    with torch.no_grad():
        if arch == "bert":
            labels = torch.full((B, T), -100, dtype=torch.long)
            for s in range(B):
                labels[s, b["mlm_positions"][s]] = torch.tensor(b["mlm_labels"][s])
            out = model(input_ids=tokens, attention_mask=mask,
                        token_type_ids=torch.tensor(b["segments"]), labels=labels,
                        next_sentence_label=torch.tensor(b["nsp_labels"]), output_hidden_states=True)
        else:
            labels = torch.tensor(np.where(b["attn_mask"] == 1, b["tokens"], -100))
            out = model(input_ids=tokens, attention_mask=mask, labels=labels,
                        output_hidden_states=True)
    L = len(out.hidden_states) - 1
    H = out.hidden_states[0].shape[-1]
    worst = max(rel(hidden[f"hidden.{k}"], out.hidden_states[k].reshape(B * T, H).numpy())
                for k in range(L + 1))
    check(worst < TOL, f"{label}: hidden states of all {L + 1} layers, max rel diff {worst:.2e}")
    h = hidden[f"hidden.{L}"]
    if arch == "bert":
        t = h @ w["cls.predictions.transform.dense.weight"].T + w["cls.predictions.transform.dense.bias"]
        t = layer_norm(gelu_erf(t), w["cls.predictions.transform.LayerNorm.weight"],
                       w["cls.predictions.transform.LayerNorm.bias"], cfg["layer_norm_eps"])
        mlm = t @ w["bert.embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]
        cls_h = h.reshape(B, T, H)[:, 0]
        pooled = np.tanh(cls_h @ w["bert.pooler.dense.weight"].T + w["bert.pooler.dense.bias"])
        nsp = pooled @ w["cls.seq_relationship.weight"].T + w["cls.seq_relationship.bias"]
        r1 = rel(out.prediction_logits.reshape(B * T, -1).numpy(), mlm)
        r2 = rel(out.seq_relationship_logits.numpy(), nsp)
        check(max(r1, r2) < TOL, f"{label}: MLM logits rel diff {r1:.2e}, NSP logits {r2:.2e} "
              f"({B}x{T} tokens, vocab {V})")
    else:
        lm = h @ w["transformer.tokens_embed.weight"].T
        r1 = rel(out.logits.reshape(B * T, -1).numpy(), lm)
        check(r1 < TOL, f"{label}: LM logits rel diff {r1:.2e} ({B}x{T} tokens, vocab {V})")
    rl = abs(float(out.loss) - res["loss"]) / abs(float(out.loss))
    check(rl < TOL, f"{label}: loss cloze {res['loss']:.7f} transformers {float(out.loss):.7f} "
          f"(rel {rl:.1e})")


def check_import(case, dump, prep, work):
    label, src = case["label"], case["hf_dir"]
    model = BertModel.from_pretrained(src)
    model.eval()
    lines = [l.rstrip("\n") for l in open(case["text"], encoding="utf-8") if l.strip()][:case["lines"]]
    ids = check_tokenizer(label + " (re-exported)", prep, case["export"], case["vocab"], None, lines)
    b = make_batch("bert", ids, 64, 4, 101, 102, 0, 30522, 3)
    bpath = os.path.join(work, label + ".batch")
    write_batch(bpath, "bert", b)
    hidden, _ = run_dump(dump, case["ckpt"], bpath, os.path.join(work, label + ".dump"))
    B, T = b["B"], b["T"]
    with torch.no_grad():
        out = model(input_ids=torch.tensor(b["tokens"]), attention_mask=torch.tensor(b["attn_mask"]),
                    token_type_ids=torch.tensor(b["segments"]), output_hidden_states=True)
    L = len(out.hidden_states) - 1
    H = out.hidden_states[0].shape[-1]
    rels = [rel(hidden[f"hidden.{k}"], out.hidden_states[k].reshape(B * T, H).numpy())
            for k in range(L + 1)]
    check(max(rels) < TOL, f"{label}: imported into cloze, hidden states of all {L + 1} layers "
          f"within {max(rels):.2e} relative of BertModel's ({B}x{T} tokens)")
    again, info = AutoModelForPreTraining.from_pretrained(case["export"], output_loading_info=True)
    check(not info["missing_keys"] and not info["unexpected_keys"],
          f"{label}: re-exported, BertForPreTraining loads it with no missing or unexpected keys")


def check_finetuned(case):
    """A cloze-finetune checkpoint exported as the task model: transformers'
    logits on the dev set (its own tokenizer from the export) against those
    cloze wrote to dev_predictions.jsonl at the end of the run."""
    label, kind, export_dir, T = case["label"], case["kind"], case["export"], case["max_seq"]
    model = load_export(AutoModelForSequenceClassification if kind == "classify"
                        else AutoModelForTokenClassification, export_dir, label)
    tok = AutoTokenizer.from_pretrained(export_dir)
    preds = [json.loads(l) for l in open(case["predictions"])]
    if kind == "classify":
        rows = [l.rstrip("\n").split("\t") for l in open(case["dev"], encoding="utf-8")][1:]
        enc = tok([r[0] for r in rows], truncation=True, max_length=T, padding="max_length",
                  return_tensors="pt")
        with torch.no_grad():
            got = model(**enc).logits.numpy()
        want = np.array([p["logits"] for p in preds])
        check(got.shape == want.shape, f"{label}: {len(preds)} dev predictions for {len(rows)} rows")
        r = rel(got, want) if got.shape == want.shape else 1.0
        argmax_ok = [model.config.id2label[int(i)] for i in got.argmax(-1)] == [p["pred"] for p in preds] \
            if got.shape == want.shape else False
        check(r < TOL, f"{label}: dev logits within {r:.2e} relative of cloze's ({len(rows)} sentences)")
        check(argmax_ok, f"{label}: transformers' predicted labels (config.json id2label) = cloze's")
        return
    sents, words = [], []
    for line in open(case["dev"], encoding="utf-8"):
        if line.strip():
            words.append(line.split("\t")[0])
        elif words:
            sents.append(words)
            words = []
    if words:
        sents.append(words)
    check(len(sents) == len(preds), f"{label}: {len(preds)} dev predictions for {len(sents)} sentences")
    got, want = [], []
    enc = tok(sents, is_split_into_words=True, truncation=True, max_length=T, padding="max_length",
              return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits.numpy()
    for i, p in enumerate(preds[:len(sents)]):
        first = {}
        for t, w in enumerate(enc.word_ids(i)):
            if w is not None and w not in first:
                first[w] = t
        for w, entry in enumerate(p["words"]):
            if entry["logits"] is not None and w in first:
                got.append(logits[i, first[w]])
                want.append(entry["logits"])
    r = rel(got, want) if got else 1.0
    check(len(got) > 100 and r < TOL, f"{label}: first-piece logits of {len(got)} dev words within "
          f"{r:.2e} relative of cloze's")


def main():
    work = sys.argv[1]
    cases = json.load(open(os.path.join(work, "cases.json")))
    for case in cases["exports"]:
        check_export(case, cases["dump"], cases["prep"], work)
    for case in cases["imports"]:
        check_import(case, cases["dump"], cases["prep"], work)
    for case in cases.get("finetuned", []):
        check_finetuned(case)
    print(f"{len(failures)} failed" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
