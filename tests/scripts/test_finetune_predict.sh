#!/usr/bin/env bash
# cloze-finetune predict and run --test, on real mpirun jobs, for
# classification, tagging and SQuAD. A BERT-tiny is pre-trained for a few
# steps and fine-tuned on the tasks of tests/finetune/make_tasks.py; then:
#   * run --test FILE with FILE = the dev file: its test scores are the dev
#     scores, its test_predictions.* are predict's files byte for byte;
#   * predict with the run's last checkpoint on the dev file (another rank
#     count) scores what run reported on it (scores.json);
#   * the written files parse in the official formats and score the same by
#     independent rules: a label per line against the TSV's labels, a CoNLL
#     token<TAB>tag file against the gold tags by conlleval's chunk rules
#     (written here), SQuAD's predictions.json by tests/finetune/squad_eval.py;
#   * a file without labels (TSV without the label column, CoNLL tokens alone)
#     gets the same predictions and no scores;
#   * truncation is counted for every file (tagging at a short --max-seq: the
#     words lost are reported, and predicted O);
#   * errors: a checkpoint that is not fine-tuned, another task, --lr 0 — one
#     line, exit 1, no output directory left behind; a resume with another
#     --lr is refused (one line, the checkpoint untouched) unless
#     --allow-config-change.
set -euo pipefail
FT_WORK=ftp source "$(dirname "$0")/finetune_common.sh"
T=$work/tasks
predict() { # np out args...
  local np=$1 out=$2
  shift 2
  mpi "$np" "$FT" predict --out "$out" --threads 1 "$@" >"$out.out" 2>"$out.log" ||
    { cat "$out.log"; fail "cloze-finetune predict $*"; }
}

# ---- classification
cls=(--task tsv --text-a sentence --label label --max-seq 32)
ft 2 "$work/cls" "${cls[@]}" --train "$T/cls_train.tsv" --dev "$T/cls_dev.tsv" \
  --test "$T/cls_dev.tsv" --batch 8 --epochs 3 --lr 1e-3 --seed 3
predict 1 "$work/cls_p" "${cls[@]}" --init "$(last_ckpt "$work/cls")" --input "$T/cls_dev.tsv" \
  --micro-batch 4
cmp "$work/cls/test_predictions.txt" "$work/cls_p/predictions.txt" ||
  fail "run --test and predict wrote different classification predictions"
cut -f1 "$T/cls_dev.tsv" >"$work/cls_unlabelled.tsv" # the sentence column alone
predict 2 "$work/cls_u" "${cls[@]}" --init "$(last_ckpt "$work/cls")" \
  --input "$work/cls_unlabelled.tsv" --micro-batch 4
cmp "$work/cls_p/predictions.txt" "$work/cls_u/predictions.txt" ||
  fail "an unlabelled file got other predictions"
[ -e "$work/cls_u/scores.json" ] && fail "scores.json for a file without labels"
grep -q "without labels" "$work/cls_u.log" || fail "predict did not say the file has no labels"
$PY - "$work" "$T/cls_dev.tsv" <<'PY' || fail "classification scores"
import csv, json, sys
w, gold_file = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(gold_file), delimiter="\t"))
pred = open(f"{w}/cls_p/predictions.txt").read().split("\n")
assert pred[-1] == "" and len(pred) - 1 == len(rows), (len(pred), len(rows))
acc = 100 * sum(p == r["label"] for p, r in zip(pred, rows)) / len(rows)
res = [json.loads(l) for l in open(f"{w}/cls/results.jsonl")]
dev = [r for r in res if r.get("final")][-1]
test = [r for r in res if r.get("kind") == "test"][-1]
sc = json.load(open(f"{w}/cls_p/scores.json"))
for name, got in (("run dev", dev["score"]), ("run test", test["score"]), ("predict", sc["score"]),
                  ("predict input", sc["input"]["accuracy"])):
    assert abs(got - acc) < 1e-4, f"{name}: {got} != accuracy of predictions.txt {acc}"
assert sc["input"]["examples"] == len(rows) and sc["file"].endswith("cls_dev.tsv"), sc
print(f"classification: accuracy {acc:.2f} (run dev, run test, predict and predictions.txt agree)")
PY

# ---- batches padded to their longest sequence (the default) train and
# predict as batches padded to --max-seq: the same losses (dropout on: its
# masks do not depend on the padded length) and the same predictions
ft 2 "$work/cls_max" "${cls[@]}" --train "$T/cls_train.tsv" --dev "$T/cls_dev.tsv" \
  --test "$T/cls_dev.tsv" --batch 8 --epochs 3 --lr 1e-3 --seed 3 --pad max
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/cls/metrics.jsonl" "$work/cls_max/metrics.jsonl" \
  --rel 1e-5 --fields loss,task_loss,grad_norm || fail "--pad longest trains otherwise than --pad max"
cmp "$work/cls/test_predictions.txt" "$work/cls_max/test_predictions.txt" ||
  fail "--pad longest predicts otherwise than --pad max"
$PY - "$work/cls/dev_predictions.jsonl" "$work/cls_max/dev_predictions.jsonl" <<'PY' || fail "--pad: dev logits"
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
worst = max(abs(x - y) for p, q in zip(a, b) for x, y in zip(p["logits"], q["logits"]))
assert len(a) == len(b) and worst < 1e-4, worst
print(f"--pad longest = --pad max: dev logits within {worst:.1e}")
PY

# ---- tagging, at a --max-seq short enough to cut sentences
tag=(--task conll --max-seq 12)
ft 2 "$work/tag" "${tag[@]}" --train "$T/tag_train.conll" --dev "$T/tag_dev.conll" \
  --test "$T/tag_dev.conll" --batch 8 --epochs 4 --lr 3e-3
grep -q "dev file .*sentences cut to 12 tokens: [1-9][0-9]* of [0-9]* words .*lost (predicted as class 0)" "$work/tag.log" ||
  { cat "$work/tag.log"; fail "the dev file's truncation was not reported"; }
grep -q "test file .*sentences cut to 12 tokens" "$work/tag.log" ||
  fail "the test file's truncation was not reported"
predict 1 "$work/tag_p" "${tag[@]}" --init "$(last_ckpt "$work/tag")" --input "$T/tag_dev.conll" \
  --micro-batch 4
cmp "$work/tag/test_predictions.conll" "$work/tag_p/predictions.conll" ||
  fail "run --test and predict wrote different tag files"
predict 2 "$work/tag_pm" "${tag[@]}" --init "$(last_ckpt "$work/tag")" --input "$T/tag_dev.conll" \
  --micro-batch 4 --pad max
cmp "$work/tag_p/predictions.conll" "$work/tag_pm/predictions.conll" ||
  fail "tagging: --pad longest predicts otherwise than --pad max"
grep -q "input file .*sentences cut to 12 tokens" "$work/tag_p.log" ||
  fail "predict did not report its input's truncation"
awk -F'\t' 'NF { print $1 } !NF { print "" }' "$T/tag_dev.conll" >"$work/tag_tokens.conll"
predict 2 "$work/tag_u" "${tag[@]}" --init "$(last_ckpt "$work/tag")" \
  --input "$work/tag_tokens.conll" --micro-batch 4
cmp "$work/tag_p/predictions.conll" "$work/tag_u/predictions.conll" ||
  fail "tokens alone got other predictions"
$PY - "$work" "$T/tag_dev.conll" <<'PY' || fail "tagging scores"
import json, sys
w, gold_file = sys.argv[1], sys.argv[2]

def sentences(path, col):
    out, cur = [], []
    for line in open(path, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        if not line.strip():
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append((f[0], f[col]))
    if cur:
        out.append(cur)
    return out

def chunks(tags):  # conlleval: a chunk starts at B-X, or I-X after O / another type
    found, start, kind = set(), None, None
    for i, t in enumerate(tags + ["O"]):
        p, _, k = t.partition("-")
        if start is not None and (t == "O" or p == "B" or k != kind or not k):
            found.add((kind, start, i))
            start = kind = None
        if start is None and t != "O" and k:
            start, kind = i, k
    return found

gold = sentences(gold_file, -1)
pred = sentences(f"{w}/tag_p/predictions.conll", 1)
assert len(gold) == len(pred), (len(gold), len(pred))
tp = ng = np_ = 0
for g, p in zip(gold, pred):
    assert [x[0] for x in g] == [x[0] for x in p], "predictions.conll lost or changed tokens"
    off = 0
    gc, pc = chunks([x[1] for x in g]), chunks([x[1] for x in p])
    tp, ng, np_ = tp + len(gc & pc), ng + len(gc), np_ + len(pc)
prec, rec = 100 * tp / max(np_, 1), 100 * tp / max(ng, 1)
f1 = 2 * prec * rec / (prec + rec) if tp else 0.0
res = [json.loads(l) for l in open(f"{w}/tag/results.jsonl")]
dev = [r for r in res if r.get("final")][-1]
sc = json.load(open(f"{w}/tag_p/scores.json"))
for name, got in (("run dev", dev["dev"]["f1"]), ("predict", sc["input"]["f1"])):
    assert abs(got - f1) < 1e-4, f"{name}: entity F1 {got} != conlleval rules on predictions.conll {f1}"
assert abs(sc["input"]["precision"] - prec) < 1e-4 and abs(sc["input"]["recall"] - rec) < 1e-4, sc
assert sc["words_lost"] > 0 and sc["truncated"] > 0, sc
print(f"tagging: entity F1 {f1:.2f} (P {prec:.1f} R {rec:.1f}); {sc['truncated']} sentences cut, "
      f"{sc['words_lost']} words lost")
PY

# ---- SQuAD
sq=(--task squad --max-seq 64 --doc-stride 16 --max-query 16)
ft 2 "$work/squad" "${sq[@]}" --train "$T/squad_train.json" --dev "$T/squad_dev.json" \
  --test "$T/squad_dev.json" --batch 8 --epochs 2 --lr 1e-3
cmp "$work/squad/predictions.json" "$work/squad/test_predictions.json" ||
  fail "SQuAD: test predictions of the dev file differ from its dev predictions"
predict 1 "$work/squad_p" "${sq[@]}" --init "$(last_ckpt "$work/squad")" \
  --input "$T/squad_dev.json" --micro-batch 4
cmp "$work/squad/predictions.json" "$work/squad_p/predictions.json" ||
  fail "SQuAD: predict's predictions.json differs from the run's"
$PY "$SRC/tests/finetune/squad_eval.py" "$T/squad_dev.json" "$work/squad_p/predictions.json" \
  "$work/squad_p/scores.json" input || fail "SQuAD: predict's EM/F1 differ from the official rules"
$PY "$SRC/tests/finetune/squad_eval.py" "$T/squad_dev.json" "$work/squad/test_predictions.json" \
  "$work/squad/results.jsonl" test || fail "SQuAD: run --test's EM/F1 differ from the official rules"

# ---- errors: one error line, exit 1, nothing left behind
err_case() { # name expected-text command...
  local name=$1 want=$2
  shift 2
  set +e
  "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  set -e
  [ "$rc" = 1 ] || { cat "$work/$name.err"; fail "$name: exit $rc, not 1"; }
  # (mpirun's short note that a process exited non-zero may follow)
  [ "$(grep -c error "$work/$name.err")" = 1 ] || { cat "$work/$name.err"; fail "$name: not one line"; }
  grep -q -- "$want" "$work/$name.err" || { cat "$work/$name.err"; fail "$name: no '$want'"; }
  ! grep -q "MPI_ABORT\|ORTE" "$work/$name.err" || fail "$name: an MPI banner"
}
err_case not_finetuned "not a fine-tuned checkpoint" mpi 2 "$FT" predict --init "$bert" \
  "${cls[@]}" --input "$T/cls_dev.tsv" --out "$work/bad1" --threads 1
[ -e "$work/bad1" ] && fail "a failed predict left its output directory"
err_case other_task "was fine-tuned on tsv" mpi 2 "$FT" predict --init "$(last_ckpt "$work/cls")" \
  --task conll --input "$T/tag_dev.conll" --out "$work/bad2" --threads 1
[ -e "$work/bad2" ] && fail "a failed predict left its output directory"
err_case lr0 "\-\-lr 0: must be in" mpi 2 "$FT" run --init "$bert" "${cls[@]}" \
  --train "$T/cls_train.tsv" --dev "$T/cls_dev.tsv" --lr 0 --out "$work/bad3" --threads 1
[ -e "$work/bad3" ] && fail "a run refused for --lr 0 left its output directory"
printf 'sentence\tlabel\nfine\t7\n' >"$work/badlabel.tsv"
err_case bad_dev "badlabel.tsv:2" mpi 2 "$FT" run --init "$bert" "${cls[@]}" \
  --train "$T/cls_train.tsv" --dev "$work/badlabel.tsv" --out "$work/bad4" --threads 1
[ -e "$work/bad4" ] && fail "a run refused for its dev file left its output directory (vocab/)"
# a stopped run resumed with another --lr: refused naming optim.lr, its
# checkpoint untouched; --allow-config-change continues it
stop=(--task tsv --text-a sentence --label label --max-seq 32 --train "$T/cls_train.tsv"
  --dev "$T/cls_dev.tsv" --batch 8 --epochs 1)
ft 2 "$work/cls_stop" "${stop[@]}" --lr 1e-3 --stop-after 2
sum_before=$(sha256sum "$work"/cls_stop/ckpt-*.lz4)
err_case resume_lr "optim.lr 0.001 -> 0.002" mpi 2 "$FT" run --init "$bert" "${stop[@]}" --lr 2e-3 \
  --out "$work/cls_stop" --threads 1 --quiet --resume auto
[ "$(sha256sum "$work"/cls_stop/ckpt-*.lz4)" = "$sum_before" ] || fail "a refused resume changed the checkpoint"
ft 2 "$work/cls_stop" "${stop[@]}" --lr 2e-3 --resume auto --allow-config-change
grep -q '"final":true' "$work/cls_stop/results.jsonl" || fail "--allow-config-change did not finish the run"
echo "predict: classification, tagging and SQuAD agree with run; errors said once"
