#!/usr/bin/env python3
"""Checks a BERT checkpoint's loading in cloze-finetune and its in-domain masked-LM skill.

  hf_mlm_check.py HF_DIR FEATURES.safetensors SST2_DEV.tsv

HF_DIR: `cloze-ckpt export-hf CKPT HF_DIR`; FEATURES: `cloze-finetune features --init CKPT
--input LINES --max-seq 64 --layers -1` on some sentences. Prints two JSON lines:
1) the features (cloze-finetune's base_load + copy_tensors, the path `run` uses) against
   transformers' BertModel on HF_DIR with the same token ids: max relative difference of
   the last layer over the real tokens;
2) masked-LM accuracy and loss on all sentences of SST2_DEV.tsv (15% of the non-special
   positions replaced by [MASK], numpy seed 0), BertForPreTraining on HF_DIR.
"""
import sys, json, numpy as np, torch
from safetensors.numpy import load_file
from transformers import BertModel, BertForPreTraining, AutoTokenizer
torch.set_num_threads(1)
hf, feats, dev = sys.argv[1:4]
f = load_file(feats)
X, mask, toks = f["features"], f["mask"], f["tokens"]
H = X.shape[1]
T = 64  # the --max-seq of the features
N = toks.shape[0] // T
ids = torch.tensor(toks.reshape(N, T).astype(np.int64))
am = torch.tensor(mask.reshape(N, T).astype(np.int64))
m = BertModel.from_pretrained(hf, add_pooling_layer=False).eval()
with torch.no_grad():
    h = m(input_ids=ids, attention_mask=am, token_type_ids=torch.zeros_like(ids)).last_hidden_state.numpy()
c = X.reshape(N, T, H)
sel = am.numpy().astype(bool)
d = np.abs(c[sel] - h[sel]).max() / np.abs(h[sel]).max()
print(json.dumps({"check": "features_vs_transformers", "sequences": N, "max_rel_diff": float(d)}))
tok = AutoTokenizer.from_pretrained(hf)
sents = [l.split("\t")[0] for l in open(dev).read().splitlines()[1:]]
enc = tok(sents, max_length=T, truncation=True, padding="max_length", return_tensors="pt")
x = enc["input_ids"].clone()
special = (x == tok.cls_token_id) | (x == tok.sep_token_id) | (x == tok.pad_token_id)
rng = np.random.default_rng(0)
pick = torch.tensor(rng.random(x.shape) < 0.15) & ~special
labels = torch.where(pick, x, torch.full_like(x, -100))
x[pick] = tok.mask_token_id
mm = BertForPreTraining.from_pretrained(hf).eval()
with torch.no_grad():
    logits = mm(input_ids=x, attention_mask=enc["attention_mask"], token_type_ids=enc["token_type_ids"]).prediction_logits
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
acc = (logits.argmax(-1)[pick] == labels[pick]).float().mean()
print(json.dumps({"check": "sst2_dev_mlm", "masked": int(pick.sum()), "mlm_loss": float(loss), "mlm_acc": float(acc)}))
