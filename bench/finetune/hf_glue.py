#!/usr/bin/env python3
"""The PyTorch side of docs/finetune.md's comparison (a): Hugging Face
transformers' BertForSequenceClassification fine-tuned with the recipe that
`cloze-finetune run` uses, on the same examples, printing one JSON line of
dev scores per run (the same fields as cloze-finetune's results).

  hf_glue.py --model DIR --task sst2|mrpc --train TSV --dev TSV
             [--train-limit N] [--max-seq 128] [--lr 5e-5] [--batch 32]
             [--epochs 3] [--seed 1] [--threads 1]

Recipe (both sides): [CLS] a [SEP] b [SEP] padded to max_seq, the longer
text truncated first; pooler + dropout 0.1 + a fresh classifier (N(0, 0.02)
weights, zero bias); AdamW with decoupled weight decay 0.01 on every tensor
but biases and LayerNorm, eps 1e-6, bias correction, betas 0.9/0.999;
linear warm-up over 10 % of the steps then linear decay to 0; gradient norm
clipped to 1; batches of `batch` examples in a shuffled order per epoch, the
last partial batch of an epoch kept; dev scores after the last epoch.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from transformers import BertForSequenceClassification, BertTokenizerFast  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()

TASKS = {  # text_a, text_b, label column, labels, metric
    "sst2": ("sentence", None, "label", ["0", "1"], "accuracy"),
    "mrpc": ("#1 String", "#2 String", "Quality", ["0", "1"], "f1"),
    "rte": ("sentence1", "sentence2", "label", ["entailment", "not_entailment"], "accuracy"),
}


def read_tsv(path, task, limit=0):
    a_col, b_col, l_col, labels, _ = TASKS[task]
    with open(path, encoding="utf-8-sig") as f:
        rows = [l.rstrip("\r\n").split("\t") for l in f if l.strip()]
    hdr, rows = rows[0], rows[1:]
    ia, il = hdr.index(a_col), hdr.index(l_col)
    ib = hdr.index(b_col) if b_col else None
    out = [(r[ia], r[ib] if ib is not None else None, labels.index(r[il])) for r in rows]
    return out[:limit] if limit else out


def encode(tok, ex, max_seq):
    a = [e[0] for e in ex]
    b = [e[1] for e in ex] if ex[0][1] is not None else None
    enc = tok(a, b, truncation="longest_first", max_length=max_seq, padding="max_length",
              return_tensors="pt")
    return enc, torch.tensor([e[2] for e in ex])


def scores(gold, pred):
    gold, pred = np.asarray(gold), np.asarray(pred)
    tp = float(((gold == 1) & (pred == 1)).sum())
    fp = float(((gold == 0) & (pred == 1)).sum())
    fn = float(((gold == 1) & (pred == 0)).sum())
    tn = float(((gold == 0) & (pred == 0)).sum())
    den = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return {"accuracy": float((gold == pred).mean()),
            "f1": 2 * tp / (2 * tp + fp + fn) if tp else 0.0,
            "mcc": (tp * tn - fp * fn) / math.sqrt(den) if den else 0.0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--task", required=True, choices=sorted(TASKS))
    ap.add_argument("--train", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--train-limit", type=int, default=0)
    ap.add_argument("--max-seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    tok = BertTokenizerFast.from_pretrained(args.model)
    model = BertForSequenceClassification.from_pretrained(args.model, num_labels=2)
    model.classifier.weight.data.normal_(0.0, 0.02)  # as cloze: N(0, 0.02) cut at 2 std
    model.classifier.weight.data.clamp_(-0.04, 0.04)
    model.classifier.bias.data.zero_()
    train = read_tsv(args.train, args.task, args.train_limit)
    dev = read_tsv(args.dev, args.task)
    x_train, y_train = encode(tok, train, args.max_seq)
    x_dev, y_dev = encode(tok, dev, args.max_seq)

    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.999), eps=1e-6)
    per_epoch = math.ceil(len(train) / args.batch)
    total = per_epoch * args.epochs
    warm = int(0.1 * total)

    def lr_at(step):
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s))
    t0 = time.time()
    step = 0
    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(len(train))
        for k in range(per_epoch):
            idx = torch.tensor(order[k * args.batch:(k + 1) * args.batch])
            out = model(input_ids=x_train["input_ids"][idx],
                        attention_mask=x_train["attention_mask"][idx],
                        token_type_ids=x_train["token_type_ids"][idx], labels=y_train[idx])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
    model.eval()
    preds = []
    with torch.no_grad():
        for k in range(0, len(dev), 64):
            out = model(input_ids=x_dev["input_ids"][k:k + 64],
                        attention_mask=x_dev["attention_mask"][k:k + 64],
                        token_type_ids=x_dev["token_type_ids"][k:k + 64])
            preds += out.logits.argmax(-1).tolist()
    s = scores(y_dev.tolist(), preds)
    rec = {"framework": "transformers", "task": args.task, "seed": args.seed, "lr": args.lr,
           "batch": args.batch, "epochs": args.epochs, "max_seq": args.max_seq,
           "train_examples": len(train), "dev_examples": len(dev), "steps": step,
           "seconds": round(time.time() - t0, 1), "dev": s, "metric": TASKS[args.task][4],
           "score": s[TASKS[args.task][4]]}
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
