#!/usr/bin/env bash
# Fine-tuning per point (cloze-sweep run + cloze-finetune grid), end to end on
# real 2-rank jobs: a 1 x 2 sweep of tiny BERTs, each point fine-tuned on a
# two-class TSV made here (the label is which of two marker words the
# sentence holds) over a grid of 2 learning rates x 2 restarts, plus a task
# whose data is missing. Checked:
#  - ft_tsv / ft_tsv_std / ft_tsv_n of each point are what direct
#    `cloze-finetune run`s on that point's final checkpoint give: the best
#    learning rate's mean and sample std over the 2 seeds (computed here),
#    n = restarts; the report's task column shows them;
#  - the failing task is recorded (its column empty, the row's error names
#    it) and the sweep goes on (the other task and point are done);
#  - a rerun does not run the finished fine-tuning again (its grid is not
#    touched), retries the failed one; a task whose result and one grid run
#    are removed is resumed: only that run is redone, the same columns;
#  - plan and status count and show the fine-tuning runs.
set -euo pipefail
source "$(dirname "$0")/sweep_common.sh"
work=$(mktemp -d /tmp/cloze-sweep-ft-XXXXXX)
ok=0
trap '[ $ok = 1 ] && rm -rf "$work" || echo "kept $work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- the task (sweep_common.sh's ft_task) and the spec: learning rates
# 1e-3 and 3e-3, and an sst2 task whose data is missing
ft_task "$work/task"
ft_spec "$work/ft.cfg" "$work/task" "1e-3, 3e-3" ',
    { task = "sst2"; data = "'"$work"'/no-such-dir"; restarts = 1;
      grid = { lr = [3e-4]; batch = [8]; epochs = [1]; }; }'
SPEC=$work/ft.cfg
S=$work/sweep
"$SWEEP" plan "$SPEC" --dir "$S" --probe 0 "${SWEEP_ARGS[@]}" >"$work/plan.txt" || { cat "$work/plan.txt"; fail "plan"; }
grep -q "tsv 2 configuration(s) x 2 restart(s), sst2 1 configuration(s) x 1 restart(s); 5 run(s) per point, 10 in all" \
  "$work/plan.txt" || { cat "$work/plan.txt"; fail "plan does not count the fine-tuning runs"; }

rc=0
"$SWEEP" run "$SPEC" --dir "$S" "${SWEEP_ARGS[@]}" >"$work/run1.log" 2>&1 || rc=$?
[ $rc = 1 ] || { cat "$work/run1.log"; fail "a sweep with a failed fine-tuning exits $rc, not 1"; }
R=$S/results.csv
# the selection figure's name comes from the grid's results.jsonl
[ "$(grep -c "fine-tuning tsv: dev accuracy" "$work/run1.log")" = 2 ] ||
  { cat "$work/run1.log"; fail "the log does not name the selection figure (accuracy) for both points"; }
[ "$(csv_column "$R" status | sort -u)" = done ] || { cat "$work/run1.log"; fail "points not done"; }
for p in $(csv_column "$R" name); do
  grep -q '"status":"done"' "$S/points/$p/finetune/tsv/state.json" || { cat "$work/run1.log"; fail "$p: tsv not done"; }
  grep -q '"status":"failed"' "$S/points/$p/finetune/sst2/state.json" || fail "$p: sst2 not failed"
done
[ "$(csv_column "$R" ft_tsv_n | sort -u)" = 2 ] || fail "ft_tsv_n is not the 2 restarts"
[ -z "$(csv_column "$R" ft_sst2 | sort -u)" ] || fail "the failed task has a score"
csv_column "$R" error | grep -v -q "fine-tuning sst2: cloze-finetune exit" && fail "the error column does not name the failed task"
[[ "$(csv_column "$R" error)" == *no-such-dir* ]] || fail "the error column does not say why"

# ---- the independent check: direct cloze-finetune runs on point 0's checkpoint
p0=$(csv_column "$R" name | sed -n 1p)
steps=$(csv_column "$R" steps | sed -n 1p)
ckpt=$S/points/$p0/$(printf 'ckpt-%08d.lz4' "$steps")
[ -s "$ckpt" ] || fail "no final checkpoint $ckpt"
for lr in 1e-3 3e-3; do
  for seed in 1 2; do
    mpi 2 "$BIN/cloze-finetune" run --init "$ckpt" --task tsv --train "$work/task/train.tsv" \
      --dev "$work/task/dev.tsv" --out "$work/direct/$lr-$seed" --lr $lr --batch 8 --epochs 6 \
      --seed $seed --threads 1 "${FT_ARGS[@]}" \
      2>"$work/direct-$lr-$seed.log" || { cat "$work/direct-$lr-$seed.log"; fail "direct run"; }
  done
done
$PY - "$work/direct" "$R" "$p0" <<'EOF' || fail "ft columns differ from the direct runs"
import csv, json, statistics, sys
d, results, p0 = sys.argv[1:]
def final(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    return [r for r in rows if r.get("final")][-1]["score"]
best = None
for lr in ("1e-3", "3e-3"):
    s = [final("%s/%s-%d/results.jsonl" % (d, lr, seed)) for seed in (1, 2)]
    m = statistics.mean(s)
    if best is None or m > best[0]:
        best = (m, statistics.stdev(s), lr, s)
row = [r for r in csv.DictReader(open(results)) if r["name"] == p0][0]
print("direct: lr %s scores %s mean %.4f std %.4f; sweep %s ± %s" % (best[2], best[3], best[0], best[1], row["ft_tsv"], row["ft_tsv_std"]))
assert len({x for lr_s in [best[3]] for x in lr_s}) > 1 or best[0] > 60, "the fine-tuning learned nothing: a weak check"
assert abs(float(row["ft_tsv"]) - best[0]) < 1e-4, "mean"
assert abs(float(row["ft_tsv_std"]) - best[1]) < 1e-4, "std"
EOF

# ---- the report's task column
"$SWEEP" report "$SPEC" --dir "$S" >/dev/null || fail "report"
m=$(csv_column "$R" ft_tsv | sed -n 1p) sd=$(csv_column "$R" ft_tsv_std | sed -n 1p)
grep -q "| tsv | sst2 |" "$S/report/report.md" || fail "the report has no task columns"
grep -q "$(printf '%.2f ± %.2f' "$m" "$sd") | – |" "$S/report/report.md" ||
  { cat "$S/report/report.md"; fail "the report's tsv cell is not mean ± std"; }

# ---- status
"$SWEEP" status "$SPEC" --dir "$S" >"$work/status.txt" || true
grep -q "fine-tuning: tsv done .* (n=2); sst2 failed" "$work/status.txt" || { cat "$work/status.txt"; fail "status does not show the fine-tuning"; }
grep -q "fine-tuning tasks: 2 done, 0 interrupted, 2 failed, 0 pending" "$work/status.txt" || { cat "$work/status.txt"; fail "status counts"; }

# ---- a rerun: the finished fine-tuning is not run again, the failed one is retried
cp "$R" "$work/results1.csv"
sum1=$(find "$S/points" -path '*finetune/tsv*' -type f | sort | xargs md5sum | md5sum)
"$SWEEP" run "$SPEC" --dir "$S" >"$work/run2.log" 2>&1 || true
grep -q "fine-tuning tsv" "$work/run2.log" && { cat "$work/run2.log"; fail "the rerun fine-tuned tsv again"; }
[ "$(grep -c "fine-tuning sst2: retrying" "$work/run2.log")" = 2 ] || { cat "$work/run2.log"; fail "the failed task was not retried"; }
grep -q "starting\|resuming" "$work/run2.log" && fail "the rerun pre-trained again"
[ "$(find "$S/points" -path '*finetune/tsv*' -type f | sort | xargs md5sum | md5sum)" = "$sum1" ] ||
  fail "the rerun touched the finished fine-tuning's files"

# ---- an interrupted task (no result, one of its runs gone) is resumed
p1=$(csv_column "$R" name | tail -n1)
rm "$S/points/$p1/finetune/tsv/state.json"
rm -r "$S/points/$p1/finetune/tsv/lr0.003-b8-e6-s2"
"$SWEEP" status "$SPEC" --dir "$S" >"$work/status2.txt" || true
grep -q "tsv interrupted" "$work/status2.txt" || fail "status does not show the interrupted task"
"$SWEEP" run "$SPEC" --dir "$S" >"$work/run3.log" 2>&1 || true
grep -q "fine-tuning tsv: resuming" "$work/run3.log" || { cat "$work/run3.log"; fail "the task was not resumed"; }
[ "$(grep -c "done before" "$S/points/$p1/finetune/tsv/finetune.log")" = 3 ] ||
  fail "the resumed grid did not keep its 3 finished runs"
# (error: which rank's line of the failed task comes last varies)
# (ft_tsv, ft_tsv_std: the kept runs' scores are read back from results.jsonl,
# written to 6 decimals, so the mean may differ in the last place)
$PY "$SRC/tests/scripts/compare_results.py" "$work/results1.csv" "$R" --ignore "$TIMING,error,ft_tsv,ft_tsv_std" --rows 2 ||
  fail "the resumed fine-tuning gives other results"
$PY - "$work/results1.csv" "$R" <<'EOF2' || fail "the resumed fine-tuning's scores differ"
import csv, sys
a, b = ([r for r in csv.DictReader(open(f))] for f in sys.argv[1:])
for x, y in zip(a, b):
    for k in ("ft_tsv", "ft_tsv_std"):
        assert abs(float(x[k]) - float(y[k])) <= 1e-5, (x["name"], k, x[k], y[k])
EOF2

ok=1
echo "test_sweep_finetune: ok"
