#!/usr/bin/env bash
# cloze-finetune with exact sums (--exact, dist.exact = true): one
# fine-tuning run, any allocation. A BERT-tiny pre-trained for a few steps
# is fine-tuned on the classification task of tests/finetune/make_tasks.py
# (75 steps: it learns, dev accuracy from 64, a constant guess, to over
# 90), --batch 8 in micro-batches of 2 examples (3 ranks deal the 4
# micro-batches 2, 1, 1), dropout on, a dev evaluation after every epoch
# and a --test file. On 1 rank x 1 thread, 2 ranks x 2 threads and 3 ranks
# x 1 thread:
#   * metrics.jsonl's numbers (timings aside) are the same text;
#   * results.jsonl's dev and test lines (the seconds and rank count aside),
#     dev_predictions.jsonl (every dev logit) and test_predictions.txt are
#     the same bytes;
#   * the last checkpoint's params, adam_m and adam_v blobs are the same;
# a run stopped after 30 steps on 3 ranks and resumed on 2 (a requeue onto
# fewer nodes) ends with the same bytes and numbers as the 1-rank run;
# multiple choice (3 sequences an example, BERT's pooled [CLS]) and SQuAD
# (windows, per-token logits, predictions.json) give the same bytes on 1
# and 3 ranks too; and the grid subcommand passes --exact on: its point on 2 ranks ends with
# the 1-rank run's params. predict with that checkpoint on 1 rank and on 3
# ranks x 2 threads writes the same predictions.txt and scores.json, and
# the run's own test_predictions.txt.
# Not vacuous: the same 1-rank / 3-rank pair without --exact (the same
# micro-batches, dealt alike, summed in fp32) ends with other params.
# Refused in one line, said once: more ranks than micro-batches (--batch 8
# at the exact default of 4 examples per micro-batch on 3 ranks), naming
# --batch and --micro-batch.
set -euo pipefail
FT_WORK=ftx source "$(dirname "$0")/finetune_common.sh"
T=$work/tasks
task=(--task tsv --text-a sentence --label label --train "$T/cls_train.tsv" --dev "$T/cls_dev.tsv"
  --test "$T/cls_dev.tsv" --max-seq 32 --epochs 3 --lr 3e-3 --seed 3 --eval-every-epoch)
cls=("${task[@]}" --batch 8 --micro-batch 2)

# metrics.jsonl less timings and predictions, one line per record
numbers() { $PY "$SRC/tests/scripts/metrics_numbers.py" "$1"; }
# results.jsonl less the seconds, the rank count and the run's directory
results() { sed "s/\"ranks\":[0-9]*,//;s/,\"seconds\":[0-9.]*//;s#$(dirname "$1")#RUN#" "$1"; }
blobs() { # the last checkpoint's params, adam_m, adam_v
  local b
  for b in params adam_m adam_v; do "$BIN/cloze-ckpt" dump-blob "$(last_ckpt "$1")" $b | sha256sum; done
}
same() { # same A B: every number the run reports, and its checkpoint
  local a=$work/$1 b=$work/$2
  diff <(numbers "$a/metrics.jsonl") <(numbers "$b/metrics.jsonl") >"$work/diff" ||
    { head -4 "$work/diff"; fail "$1 and $2: metrics.jsonl differs"; }
  diff <(results "$a/results.jsonl") <(results "$b/results.jsonl") >"$work/diff" ||
    { head -4 "$work/diff"; fail "$1 and $2: results.jsonl differs"; }
  local f n=0
  for f in dev_predictions.jsonl predictions.json test_predictions.txt; do
    [ -e "$a/$f" ] || continue
    cmp "$a/$f" "$b/$f" || fail "$1 and $2: $f differs"
    n=$((n + 1))
  done
  [ $n -gt 0 ] || fail "$1: no predictions to compare"
  [ "$(blobs "$a")" = "$(blobs "$b")" ] || fail "$1 and $2: params/adam_m/adam_v differ"
  echo "$1 = $2: same metrics, results, predictions, params, adam_m, adam_v"
}

ft 1 "$work/x1" "${cls[@]}" --exact
ft 2 "$work/x2" "${cls[@]}" --exact --threads 2
ft 3 "$work/x3" "${cls[@]}" --exact
grep -q '"final":true' "$work/x1/results.jsonl" || fail "the run did not finish"
[ "$(grep -c '"kind":"eval"' "$work/x1/results.jsonl")" = 3 ] || fail "not a dev line per epoch"
[ "$(grep -c '"step"' "$work/x1/metrics.jsonl")" -ge 20 ] || fail "metrics.jsonl: too few records"
grep '"final":true' "$work/x1/results.jsonl" | grep -q '"score":9[0-9]\.' ||
  fail "the run did not learn (a dev accuracy of 90 or more expected)"
same x1 x2
same x1 x3
ft 3 "$work/req" "${cls[@]}" --exact --stop-after 30
ft 2 "$work/req" "${cls[@]}" --exact --resume auto
same x1 req
cho=(--task choice --train "$T/choice_train.jsonl" --dev "$T/choice_dev.jsonl" --max-seq 48
  --batch 8 --micro-batch 2 --epochs 1 --lr 1e-3 --seed 6 --exact)
ft 1 "$work/cho1" "${cho[@]}"
ft 3 "$work/cho3" "${cho[@]}" --threads 2
same cho1 cho3
sq=(--task squad --train "$T/squad_train.json" --dev "$T/squad_dev.json" --max-seq 64
  --doc-stride 16 --max-query 16 --batch 8 --micro-batch 2 --epochs 1 --lr 1e-3 --exact)
ft 1 "$work/sq1" "${sq[@]}"
ft 3 "$work/sq3" "${sq[@]}"
same sq1 sq3

# the grid passes --exact on: its one point on 2 ranks = the 1-rank run
mpi 2 "$FT" grid --init "$bert" --out "$work/grid" --threads 1 --quiet "${cls[@]}" --exact \
  --lr 3e-3 --batch 8 --epochs 3 >"$work/grid.out" 2>"$work/grid.log" ||
  { cat "$work/grid.log"; fail "grid --exact"; }
[ "$(blobs "$work/grid"/lr*-s3)" = "$(blobs "$work/x1")" ] ||
  fail "grid --exact on 2 ranks: params differ from the 1-rank run"
echo "grid --exact on 2 ranks = run on 1 rank"

# predict on 1 and 3 ranks: the same files, and the run's test predictions
ck=$(last_ckpt "$work/x1")
pargs=(--task tsv --text-a sentence --label label --init "$ck" --input "$T/cls_dev.tsv")
mpi 1 "$FT" predict --out "$work/p1" --threads 1 "${pargs[@]}" >/dev/null 2>"$work/p1.log" ||
  { cat "$work/p1.log"; fail "predict on 1 rank"; }
mpi 3 "$FT" predict --out "$work/p3" --threads 2 "${pargs[@]}" >/dev/null 2>"$work/p3.log" ||
  { cat "$work/p3.log"; fail "predict on 3 ranks"; }
cmp "$work/p1/predictions.txt" "$work/p3/predictions.txt" || fail "predict: 1 and 3 ranks differ"
cmp <(sed "s#$work/p1#OUT#" "$work/p1/scores.json") <(sed "s#$work/p3#OUT#" "$work/p3/scores.json") ||
  fail "predict: scores.json differs"
cmp "$work/p1/predictions.txt" "$work/x3/test_predictions.txt" ||
  fail "predict differs from the run's --test predictions"
echo "predict on 1 and 3 ranks: the same predictions.txt and scores.json"

# not vacuous: without exact sums 1 and 3 ranks end with other params
ft 1 "$work/f1" "${cls[@]}"
ft 3 "$work/f3" "${cls[@]}"
if [ "$(blobs "$work/f1")" = "$(blobs "$work/f3")" ]; then
  fail "without --exact 1 and 3 ranks gave the same params: the test cannot tell"
fi
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/f1/metrics.jsonl" "$work/f3/metrics.jsonl" \
  --rel 1e-4 --fields loss,task_loss || fail "without --exact 3 ranks train otherwise than 1"
echo "without --exact: 1 and 3 ranks differ in bits, agree to rounding"

# more ranks than micro-batches: one line naming the options, said once
set +e
mpi 3 "$FT" run --init "$bert" --out "$work/few" --threads 1 --quiet "${task[@]}" --batch 8 \
  --exact >"$work/few.out" 2>"$work/few.log"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$work/few.log"; fail "3 ranks for 2 micro-batches: exit $rc, not 1"; }
grep -q -- '--batch / --micro-batch = 8 / 4 = 2 micro-batches a step, fewer than the 3 ranks' \
  "$work/few.log" || { cat "$work/few.log"; fail "the refusal does not name the options"; }
[ "$(grep -c 'micro-batches a step' "$work/few.log")" = 1 ] ||
  { cat "$work/few.log"; fail "the refusal is said more than once"; }
[ -e "$work/few" ] && fail "a refused run left its output directory"
echo "test_finetune_exact: ok"
