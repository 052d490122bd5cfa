#!/usr/bin/env bash
# cloze-finetune on GPT-2's layout (conf/gpt2-mini.cfg scaled down: pre-LN,
# a final LayerNorm, the vocabulary padded to a multiple of 64) as on GPT-1
# (test_finetune.sh): the base's word embedding rows are copied and GPT-1's
# three added tokens (<s> $ <e>, Sec. 3.3) get fresh rows, also where they
# fall inside the base's padding rows; the last-token classifier with the
# auxiliary LM loss trains (loss = task + 0.5 LM, dev accuracy above
# chance) and `cloze-finetune predict` on its checkpoint scores what the run
# scored; multiple choice gives the same losses and predictions on 1 rank x
# accumulation 2 and 2 ranks x 1.
set -euo pipefail
FT_WORK=ft-gpt2 source "$(dirname "$0")/finetune_common.sh"
"$BIN/cloze-prep" vocab --kind bpe --size 400 --out "$work/encoder.json" \
  --merges-out "$work/vocab.bpe" "$data/corpus.txt" >/dev/null 2>&1
"$BIN/cloze-prep" shards --vocab "$work/encoder.json" --merges "$work/vocab.bpe" --out "$work/gsh" \
  --shards 1 --quiet "$data/corpus.txt"
gv=$(awk '$1 == "vocab" { print $3 }' "$work/gsh/train.manifest")
mpi 1 "$BIN/cloze-train" "$SRC/conf/gpt2-mini.cfg" --set model.vocab_size="$gv" --set model.layers=2 \
  --set model.hidden=32 --set model.heads=2 --set model.max_positions=64 --set data.seq=32 \
  --set data.train_manifest="$work/gsh/train.manifest" --set train.run_dir="$work/gpt2" \
  --set train.steps=5 --set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 \
  --set train.peak_gflops=10 --set optim.warmup_steps=1 --quiet 2>"$work/gpt2.log" ||
  { cat "$work/gpt2.log"; fail "cloze-train GPT-2 layout"; }
base=$(last_ckpt "$work/gpt2")
gft() { # np out args...
  local np=$1 out=$2
  shift 2
  mpi "$np" "$FT" run --init "$base" --out "$out" --threads 1 "$@" 2>"$out.log" ||
    { cat "$out.log"; fail "cloze-finetune run $*"; }
}
cls=(--task tsv --text-a sentence --label label --train "$work/tasks/cls_train.tsv"
  --dev "$work/tasks/cls_dev.tsv" --max-seq 64 --batch 8 --epochs 6 --lr 1e-3 --seed 3)

# the initialisation: a fine-tuning whose updates are below float resolution
# (lr 1e-30) ends with the base's rows and the three new ones
gft 1 "$work/init" "${cls[@]}" --epochs 1 --lr 1e-30
grep -q "fresh (seed 3): transformer.wte.weight (new rows), score.weight" "$work/init.log" ||
  { cat "$work/init.log"; fail "the new rows / the score head are not said to be fresh"; }
"$BIN/cloze-ckpt" dump-blob "$base" params >"$work/p-base"
"$BIN/cloze-ckpt" dump-blob "$(last_ckpt "$work/init")" params >"$work/p-init"
$PY - "$work/p-base" "$work/p-init" "$gv" 32 <<'PY' || fail "the word embedding's rows"
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
V, H = int(sys.argv[3]), int(sys.argv[4])
rows = lambda buf, r0, r1: struct.unpack(f"<{(r1 - r0) * H}f", buf[4 * r0 * H:4 * r1 * H])
assert rows(a, 0, V) == rows(b, 0, V), "the base's rows were not copied"
assert all(any(x != 0 for x in rows(b, r, r + 1)) for r in (V, V + 1, V + 2)), "a new token's row is 0"
pad_a = -(-V // 64) * 64
assert pad_a >= V + 3 and all(x == 0 for x in rows(a, V, V + 3)), "test premise: new rows in the padding"
print(f"word embedding: {V} base rows copied, 3 new rows fresh (inside the base's {pad_a - V} padding rows)")
PY

# classification with the auxiliary LM loss
gft 2 "$work/cls" "${cls[@]}" --quiet
$PY - "$work/cls" <<'PY' || fail "GPT-2 layout classification"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"task_loss"' in l]
r = json.loads(open(sys.argv[1] + "/results.jsonl").readlines()[-1])
assert m and all(x["lm_loss"] > 0 for x in m), "no auxiliary LM loss"
assert all(abs(x["loss"] - (x["task_loss"] + 0.5 * x["lm_loss"])) < 1e-4 * x["loss"] for x in m)
k = max(1, len(m) // 4)  # the mean of the last quarter of the logged steps below the first's
first, last = (sum(x["task_loss"] for x in part) / k for part in (m[:k], m[-k:]))
assert last < first, f"the task loss did not fall: {first:.3f} -> {last:.3f}"
assert r["score"] > 55, f"dev accuracy {r['score']} (2 balanced classes)"
print(f"GPT-2 layout: loss = task + 0.5 LM over {len(m)} steps; dev accuracy {r['score']:.2f}")
PY

# predict with the run's last checkpoint (the padded, grown vocabulary read
# back from it) on the dev file, on another rank count: the run's dev score
mpi 1 "$FT" predict --out "$work/cls_p" --threads 1 --task tsv --text-a sentence --label label \
  --max-seq 64 --init "$(last_ckpt "$work/cls")" --input "$work/tasks/cls_dev.tsv" \
  >"$work/cls_p.out" 2>"$work/cls_p.log" || { cat "$work/cls_p.log"; fail "cloze-finetune predict"; }
$PY - "$work" <<'PY' || fail "GPT-2 layout predict"
import json, sys
w = sys.argv[1]
dev = [r for r in map(json.loads, open(f"{w}/cls/results.jsonl")) if r.get("final")][-1]
sc = json.load(open(f"{w}/cls_p/scores.json"))
assert abs(sc["score"] - dev["score"]) < 1e-4, (sc["score"], dev["score"])
print(f"GPT-2 layout predict: dev accuracy {sc['score']:.2f}, the run's")
PY

# multiple choice on two rank layouts
cho=(--task choice --train "$work/tasks/choice_train.jsonl" --dev "$work/tasks/choice_dev.jsonl"
  --max-seq 48 --batch 8 --epochs 2 --lr 1e-3 --seed 6 --quiet)
gft 1 "$work/cho-np1" "${cho[@]}" --micro-batch 4
gft 2 "$work/cho-np2" "${cho[@]}"
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/cho-np1/metrics.jsonl" \
  "$work/cho-np2/metrics.jsonl" --rel 1e-5 --fields loss,task_loss,lm_loss,grad_norm ||
  fail "GPT-2 layout choice: 2 ranks differ from 1 rank"
$PY - "$work" <<'PY' || fail "GPT-2 layout multiple choice"
import json, sys
w = sys.argv[1]
p = [json.loads(l) for l in open(f"{w}/cho-np1/dev_predictions.jsonl")]
q = [json.loads(l) for l in open(f"{w}/cho-np2/dev_predictions.jsonl")]
assert p and all(len(x["logits"]) == 3 for x in p), p[:1]
assert [x["pred"] for x in p] == [x["pred"] for x in q], "predictions differ between rank layouts"
print(f"GPT-2 layout choice: {len(p)} dev examples, the same predictions on 1 and 2 ranks")
PY
echo "test_finetune_gpt2: ok"
