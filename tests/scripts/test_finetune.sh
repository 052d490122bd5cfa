#!/usr/bin/env bash
# cloze-finetune end to end, on real mpirun jobs. A BERT-tiny and a GPT-tiny
# are pre-trained for a few steps on the training tests' corpus; the tasks
# are made from the same corpus (tests/finetune/make_tasks.py): a sentence
# classification TSV, a SQuAD v1.1 JSON and a CoNLL file. Checked:
#   * classification, 1 rank x accumulation 2 == 2 ranks x 1 == 2 ranks with
#     micro-batches of 2: the same per-step losses and dev scores (the train
#     runtime's sample-to-rank mapping);
#   * stopped after 3 steps and resumed (--resume auto) == uninterrupted;
#   * the grid: every point, per-configuration mean/std, the selection;
#   * SQuAD: predictions.json scored by an independent Python version of the
#     official evaluate-v1.1.py gives cloze's EM/F1; tagging runs and scores;
#   * GPT: the last-token classifier with the auxiliary LM loss (lm_loss > 0
#     in metrics.jsonl) trains and scores; similarity (both orderings) and
#     multiple choice (GPT and BERT) give the same losses, dev scores and
#     predictions on every rank layout, with 2 / K sequences per example;
#   * features: the file's layout (sequences x tokens x layers x H);
#   * bad input: a label the task does not know is one line naming file:line
#     (once on 2 ranks, without MPI_Abort), and so is invalid UTF-8;
#   * docs/finetune.md's --help blocks are the binaries' --help.
set -euo pipefail
FT_WORK=ft source "$(dirname "$0")/finetune_common.sh"
cls=(--task tsv --text-a sentence --label label --train "$work/tasks/cls_train.tsv"
  --dev "$work/tasks/cls_dev.tsv" --max-seq 32 --batch 8 --epochs 6 --lr 1e-3 --seed 3)

# ---- rank layouts
ft 1 "$work/np1" "${cls[@]}" --micro-batch 4
ft 2 "$work/np2" "${cls[@]}"
ft 2 "$work/np2m" "${cls[@]}" --micro-batch 2
for d in np2 np2m; do
  $PY "$SRC/tests/scripts/compare_metrics.py" "$work/np1/metrics.jsonl" "$work/$d/metrics.jsonl" \
    --rel 1e-5 --fields loss,task_loss,grad_norm || fail "$d differs from 1 rank"
done
$PY - "$work" <<'PY' || fail "dev scores differ between rank layouts"
import json, sys
s = [json.loads(open(f"{sys.argv[1]}/{d}/results.jsonl").readlines()[-1]) for d in ("np1", "np2", "np2m")]
assert all(x["final"] for x in s), s
assert abs(s[0]["score"] - s[1]["score"]) < 1e-9 and abs(s[0]["score"] - s[2]["score"]) < 1e-9, [x["score"] for x in s]
assert s[1]["ranks"] == 2 and s[0]["steps"] == 6 * 25 and s[0]["dev"]["examples"] == 100, s[0]
# it learns: 64 % of the dev sentences have "the", a constant guess scores 64
assert s[0]["score"] >= 85, f"dev accuracy {s[0]['score']} after 6 epochs"
print(f"rank layouts: dev accuracy {s[0]['score']:.2f} on 1 and 2 ranks")
# dev_predictions.jsonl: a line per dev example whose labels give the reported accuracy
p = [json.loads(l) for l in open(f"{sys.argv[1]}/np1/dev_predictions.jsonl")]
assert len(p) == 100 and all(len(x["logits"]) == 2 for x in p), len(p)
acc = 100 * sum(x["pred"] == x["gold"] for x in p) / len(p)
assert abs(acc - s[0]["score"]) < 1e-4, (acc, s[0]["score"])
assert all(x["pred"] == ("0", "1")[x["logits"][1] > x["logits"][0]] for x in p)
q = [json.loads(l) for l in open(f"{sys.argv[1]}/np2/dev_predictions.jsonl")]
assert [x["pred"] for x in p] == [x["pred"] for x in q], "predictions differ between rank layouts"
PY

# ---- stop after 3 steps, resume
ft 2 "$work/sliced" "${cls[@]}" --stop-after 3
[ -s "$work/sliced/results.jsonl" ] && fail "a stopped run wrote a final result"
ft 1 "$work/sliced" "${cls[@]}" --micro-batch 4 --resume auto
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/np1/metrics.jsonl" "$work/sliced/metrics.jsonl" \
  --rel 1e-5 --fields loss,task_loss,grad_norm || fail "resumed run differs from uninterrupted"
cmp <(tail -1 "$work/np1/results.jsonl" | sed 's/"seconds":.*//;s/"ranks":[0-9]*//') \
  <(tail -1 "$work/sliced/results.jsonl" | sed 's/"seconds":.*//;s/"ranks":[0-9]*//') ||
  fail "resumed dev score differs"

# ---- the grid: 2 learning rates x 2 restarts (in a directory whose name needs
# JSON escaping: grid.jsonl must still parse and name it)
grid="$work/grid \"q\""
mpi 2 "$FT" grid --init "$bert" --out "$grid" --threads 1 --quiet --task tsv --text-a sentence \
  --label label --train "$work/tasks/cls_train.tsv" --dev "$work/tasks/cls_dev.tsv" --max-seq 32 \
  --lr 3e-4,1e-3 --batch 8 --epochs 1 --restarts 2 >"$work/grid.out" 2>"$work/grid.log" ||
  { cat "$work/grid.log"; fail "grid"; }
cat "$work/grid.out"
$PY - "$grid/grid.jsonl" "$grid" <<'PY' || fail "grid.jsonl"
import json, statistics, sys
rec = [json.loads(l) for l in open(sys.argv[1])]
pts = [r for r in rec if r["kind"] == "point"]
cfg = [r for r in rec if r["kind"] == "config"]
sel = [r for r in rec if r["kind"] == "selected"]
assert len(pts) == 4 and len(cfg) == 2 and len(sel) == 1, [r["kind"] for r in rec]
assert {p["seed"] for p in pts} == {1, 2}
for c in cfg:
    mine = [p["score"] for p in pts if p["lr"] == c["lr"]]
    assert abs(statistics.mean(mine) - c["mean"]) < 1e-4 and abs(statistics.stdev(mine) - c["std"]) < 1e-4
best = max(cfg, key=lambda c: c["mean"])
assert sel[0]["lr"] == best["lr"], (sel, best)
assert all(p["dir"].startswith(sys.argv[2] + "/lr") for p in pts + [{"dir": sel[0]["best_dir"]}])
print("grid: 4 points, 2 configurations, selected lr", sel[0]["lr"])
PY
# a second call keeps the finished points
mpi 1 "$FT" grid --init "$bert" --out "$grid" --threads 1 --quiet --task tsv --text-a sentence \
  --label label --train "$work/tasks/cls_train.tsv" --dev "$work/tasks/cls_dev.tsv" --max-seq 32 \
  --lr 3e-4,1e-3 --batch 8 --epochs 1 --restarts 2 >/dev/null 2>"$work/grid2.log" || fail "grid again"
[ "$(grep -c 'done before' "$work/grid2.log")" = 4 ] || fail "the grid ran finished points again"

# ---- SQuAD and tagging
ft 2 "$work/squad" --task squad --train "$work/tasks/squad_train.json" --dev "$work/tasks/squad_dev.json" \
  --max-seq 64 --doc-stride 16 --max-query 16 --batch 8 --epochs 2 --lr 1e-3
$PY "$SRC/tests/finetune/squad_eval.py" "$work/tasks/squad_dev.json" "$work/squad/predictions.json" \
  "$work/squad/results.jsonl" || fail "SQuAD EM/F1 differ from the official rules"
ft 2 "$work/tag" --task conll --train "$work/tasks/tag_train.conll" --dev "$work/tasks/tag_dev.conll" \
  --max-seq 48 --batch 8 --epochs 8 --lr 3e-3
$PY - "$work/tag/results.jsonl" <<'PY' || fail "tagging result"
import json, sys
r = json.loads(open(sys.argv[1]).readlines()[-1])
assert r["metric"] == "entity_f1" and r["final"], r
assert r["score"] > 20, f"entity F1 {r['score']} after 8 epochs (a constant O scores 0)"
print(f"tagging: entity F1 {r['score']:.1f} (P {r['dev']['precision']:.1f} R {r['dev']['recall']:.1f})")
PY

# ---- GPT: last-token classifier + auxiliary LM loss
"$BIN/cloze-prep" vocab --kind bpe --size 400 --out "$work/encoder.json" \
  --merges-out "$work/vocab.bpe" "$data/corpus.txt" >/dev/null 2>&1
"$BIN/cloze-prep" shards --vocab "$work/encoder.json" --merges "$work/vocab.bpe" --out "$work/gsh" \
  --shards 1 --quiet "$data/corpus.txt"
gv=$(awk '$1 == "vocab" { print $3 }' "$work/gsh/train.manifest")
mpi 1 "$BIN/cloze-train" "$SRC/conf/gpt-mini.cfg" --set model.vocab_size="$gv" --set model.layers=2 \
  --set model.hidden=32 --set model.heads=2 --set model.max_positions=64 --set data.seq=32 \
  --set data.train_manifest="$work/gsh/train.manifest" --set train.run_dir="$work/gpt" \
  --set train.steps=5 --set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 \
  --set train.peak_gflops=10 --set optim.warmup_steps=1 --quiet 2>"$work/gpt.log" ||
  { cat "$work/gpt.log"; fail "cloze-train GPT"; }
mpi 2 "$FT" run --init "$(last_ckpt "$work/gpt")" --out "$work/gptcls" --threads 1 --quiet \
  "${cls[@]}" --max-seq 64 2>"$work/gptcls.log" || { cat "$work/gptcls.log"; fail "GPT fine-tuning"; }
$PY - "$work/gptcls" <<'PY' || fail "GPT run"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"task_loss"' in l]
r = json.loads(open(sys.argv[1] + "/results.jsonl").readlines()[-1])
assert m and all(x["lm_loss"] > 0 for x in m), "no auxiliary LM loss"
assert all(abs(x["loss"] - (x["task_loss"] + 0.5 * x["lm_loss"])) < 1e-4 * x["loss"] for x in m)
print(f"GPT: loss = task + 0.5 LM over {len(m)} steps; dev accuracy {r['score']:.2f}")
PY

# ---- GPT-1's other input transformations (Sec. 3.3): similarity (both
# orderings, states added) and multiple choice (a sequence per ending,
# softmax over them); each on 1 rank x accumulation 2 == 2 ranks x 1, and
# with micro-batches of one example (its 2 / 3 sequences) 1 rank x 8 == 2
# ranks x 4: an example's sequences stay together. (Changing the micro-batch
# size changes GPT's token-mean LM loss of a micro-batch once sequences are
# padded, so layouts are compared at equal micro-batch sizes.) Then the
# transformations' own properties: a similarity model gives the same dev
# logits with the two sentences swapped; a choice model's logits follow
# the endings when they are reversed.
gpt=$(last_ckpt "$work/gpt")
sim=(--task tsv --text-a sentence1 --text-b sentence2 --label label --similarity
  --train "$work/tasks/pair_train.tsv" --dev "$work/tasks/pair_dev.tsv" --max-seq 64 --batch 8
  --epochs 2 --lr 1e-3 --seed 5)
cho=(--task choice --train "$work/tasks/choice_train.jsonl" --dev "$work/tasks/choice_dev.jsonl"
  --max-seq 48 --batch 8 --epochs 2 --lr 1e-3 --seed 6)
gft() { # np out args...
  local np=$1 out=$2
  shift 2
  mpi "$np" "$FT" run --init "$gpt" --out "$out" --threads 1 --quiet "$@" 2>"$out.log" ||
    { cat "$out.log"; fail "GPT cloze-finetune run $*"; }
}
for t in sim cho; do
  declare -n args=$t
  gft 1 "$work/gpt-$t-np1" "${args[@]}" --micro-batch 4
  gft 2 "$work/gpt-$t-np2" "${args[@]}"
  gft 1 "$work/gpt-$t-np1m" "${args[@]}" --micro-batch 1
  gft 2 "$work/gpt-$t-np2m" "${args[@]}" --micro-batch 1
  unset -n args
  for d in np2 np2m; do
    $PY "$SRC/tests/scripts/compare_metrics.py" "$work/gpt-$t-np1${d#np2}/metrics.jsonl" \
      "$work/gpt-$t-$d/metrics.jsonl" --rel 1e-5 --fields loss,task_loss,lm_loss,grad_norm ||
      fail "GPT $t: $d differs from 1 rank"
  done
done
gft 2 "$work/gpt-sim-swap" "${sim[@]}" --dev "$work/tasks/pair_dev_swapped.tsv"
gft 2 "$work/gpt-cho-rev" "${cho[@]}" --dev "$work/tasks/choice_dev_reversed.jsonl"
# BERT multiple choice (Sec. 4.4): the same structure on the pooled [CLS]
ft 1 "$work/bert-cho-np1" "${cho[@]}" --micro-batch 4
ft 2 "$work/bert-cho-np2" "${cho[@]}"
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/bert-cho-np1/metrics.jsonl" \
  "$work/bert-cho-np2/metrics.jsonl" --rel 1e-5 --fields loss,task_loss,grad_norm ||
  fail "BERT choice: 2 ranks differ from 1 rank"
$PY - "$work" <<'PY' || fail "GPT similarity / multiple choice"
import json, sys
w = sys.argv[1]
def res(d):
    return [json.loads(l) for l in open(f"{w}/{d}/results.jsonl")][-1]
for t, ex, dev, k in (("sim", 200, 60, 2), ("cho", 120, 40, 3)):
    r = [res(f"gpt-{t}-{d}") for d in ("np1", "np2", "np1m", "np2m")]
    # equal micro-batch sizes, equal scores (another micro-batch size is
    # another computation: the LM loss's token mean, the padded length)
    assert abs(r[0]["score"] - r[1]["score"]) < 1e-9 and abs(r[2]["score"] - r[3]["score"]) < 1e-9, \
        [x["score"] for x in r]
    # sequences per example: both orderings / one per ending
    assert r[0]["train_examples"] == ex and r[0]["train_features"] == k * ex, r[0]
    assert r[0]["dev"]["examples"] == dev and r[0]["steps"] == -(-2 * ex // 8), r[0]
    m = [json.loads(l) for l in open(f"{w}/gpt-{t}-np1/metrics.jsonl") if '"task_loss"' in l]
    assert m and all(abs(x["loss"] - (x["task_loss"] + 0.5 * x["lm_loss"])) < 1e-4 * x["loss"] and
                     x["lm_loss"] > 0 for x in m), "loss != task + 0.5 LM"
    p = [json.loads(l) for l in open(f"{w}/gpt-{t}-np1/dev_predictions.jsonl")]
    q = [json.loads(l) for l in open(f"{w}/gpt-{t}-np2/dev_predictions.jsonl")]
    assert len(p) == dev and all(len(x["logits"]) == k for x in p), (len(p), p[0])
    assert [x["pred"] for x in p] == [x["pred"] for x in q], "predictions differ between rank layouts"
    acc = 100 * sum(x["pred"] == x["gold"] for x in p) / dev
    assert abs(acc - r[0]["score"]) < 1e-4, (acc, r[0]["score"])
    print(f"GPT {t}: dev accuracy {r[0]['score']:.2f} on 1 and 2 ranks ({r[2]['score']:.2f} with "
          f"micro-batches of one example), {k} sequences per example")
def logits(d):
    return [x["logits"] for x in map(json.loads, open(f"{w}/{d}/dev_predictions.jsonl"))]
def close(a, b):
    return len(a) == len(b) and all(abs(u - v) <= 1e-5 * max(1.0, abs(u))
                                    for x, y in zip(a, b) for u, v in zip(x, y))
for t in ("sim", "cho"):
    assert close(logits(f"gpt-{t}-np1"), logits(f"gpt-{t}-np2")), f"{t}: dev logits differ on 2 ranks"
a, s = logits("gpt-sim-np2"), logits("gpt-sim-swap")
assert close(a, s), "similarity: swapping the two sentences changed the dev logits"
a, s = logits("gpt-cho-np2"), logits("gpt-cho-rev")
assert close(a, [x[::-1] for x in s]), "choice: reversing the endings did not reverse the logits"
print("similarity: the same logits with the sentences swapped; choice: logits follow the endings")
b = [res(f"bert-cho-{d}") for d in ("np1", "np2")]
assert b[0]["score"] == b[1]["score"] and b[0]["train_features"] == 360, b
print(f"BERT choice: dev accuracy {b[0]['score']:.2f} on 1 and 2 ranks")
PY
msg=$(mpi 1 "$FT" run --init "$bert" --out "$work/bad-sim" "${sim[@]}" --threads 1 --quiet 2>&1) &&
  fail "--similarity was accepted for a BERT model"
echo "$msg" | grep -q "similarity" || fail "the BERT similarity error does not say why: $msg"
printf '{"context": "a", "endings": ["b", "c"], "label": 0}\n{"context": "a", "endings": ["b"], "label": 0}\n' \
  >"$work/bad.jsonl"
msg=$("$FT" run --init "$bert" --out "$work/bad-cho" --task choice --train "$work/bad.jsonl" \
  --dev "$work/bad.jsonl" --threads 1 --quiet 2>&1) && fail "a 1-ending example was accepted"
echo "expected: $msg"
echo "$msg" | grep -q 'bad.jsonl:2: 1 endings' || fail "the bad choice line is not named"

# ---- features: every layer of the 2-layer model, top down
mpi 2 "$FT" features --init "$bert" --input "$work/tasks/lines.txt" --out "$work/feat.safetensors" \
  --layers -1,-2,-3 --max-seq 16 --threads 1 --quiet 2>"$work/feat.log" || { cat "$work/feat.log"; fail "features"; }
$PY - "$work/feat.safetensors" <<'PY' || fail "features file"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
assert h["features"]["shape"] == [10 * 16, 3 * 32], h["features"]
assert h["__metadata__"]["layers"] == "2,1,0", h["__metadata__"]
assert h["mask"]["shape"] == [160]
print("features:", h["features"]["shape"], "layers", h["__metadata__"]["layers"])
PY
msg=$(mpi 2 "$FT" features --init "$bert" --input "$work/tasks/lines.txt" --out "$work/feat-bad.safetensors" \
  --layers 9 --max-seq 16 --threads 1 --quiet 2>&1) && fail "features: --layers 9 of a 2-layer model was accepted"
[ "$(grep -c 'cloze-finetune: error: --layers: 9 is outside' <<<"$msg")" = 1 ] && ! grep -q MPI_ABORT <<<"$msg" ||
  fail "features: a set-up error every rank has is not one line without MPI_Abort: $msg"

# ---- bad input
printf 'sentence\tlabel\nfine\t0\nodd\t7\n' >"$work/bad.tsv"
# (on 2 ranks: every rank reads the file, so the error is said once and the
# job ends without MPI_Abort's banner, as cloze-train's config errors)
msg=$(mpi 2 "$FT" run --init "$bert" --out "$work/bad" --task sst2 --train "$work/bad.tsv" \
  --dev "$work/bad.tsv" --threads 1 --quiet 2>&1) && fail "an unknown label was accepted"
echo "expected: $msg"
grep -q '^cloze-finetune: error: .*bad.tsv:3: label "7"' <<<"$msg" || fail "the bad label's line is not named"
[ "$(grep -c 'cloze-finetune: error' <<<"$msg")" = 1 ] || fail "the bad label's error is not said once"
! grep -q MPI_ABORT <<<"$msg" || fail "MPI_Abort's banner for an error every rank has"
printf 'sentence\tlabel\nfine\t0\nbad \xff byte\t1\n' >"$work/utf.tsv"
msg=$("$FT" run --init "$bert" --out "$work/bad-utf" --task sst2 --train "$work/utf.tsv" \
  --dev "$work/utf.tsv" --threads 1 --quiet 2>&1) && fail "invalid UTF-8 in a task file was accepted"
echo "expected: $msg"
grep -q 'utf.tsv:3: invalid UTF-8 at byte offset 26' <<<"$msg" || fail "the invalid byte is not named"
# ---- docs/finetune.md quotes both commands' --help word for word
for cmd in cloze-finetune cloze-ckpt; do
  awk -v m="<!-- $cmd --help -->" '$0 == m { on = 1; next } on && /^```/ { if (n++) exit; next } on' \
    "$SRC/docs/finetune.md" >"$work/$cmd.help.doc"
  [ -s "$work/$cmd.help.doc" ] || fail "docs/finetune.md has no $cmd --help block"
  "$BIN/$cmd" --help >"$work/$cmd.help" || fail "$cmd --help exits non-zero"
  diff -u "$work/$cmd.help.doc" "$work/$cmd.help" || fail "docs/finetune.md's $cmd --help is not the binary's"
done
echo "test_finetune: ok"
