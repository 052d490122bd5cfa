#!/usr/bin/env bash
# Fine-tuning per point on Slurm: cloze-sweep submit of the 1 x 2 sweep of
# test_sweep_finetune (sweep_common.sh's ft_spec: tiny BERTs, the two-class
# TSV task, here 1 learning rate x 2 restarts) against a real one-node Slurm
# (tests/scripts/slurm_lib.sh). Checked:
#  - each array task fine-tunes its own point after pre-training (the task's
#    log says so, its finetune/tsv/state.json is done and both restarts' runs
#    are there) and the report job fine-tunes nothing;
#  - the results.csv the report job writes is identical, timing columns
#    aside (so ft_tsv, ft_tsv_std, ft_tsv_n included), to a local
#    `cloze-sweep run` of the same spec;
#  - submitting again after a point's fine-tuning was lost submits that
#    point (pre-trained, not fine-tuned: not done), whose task fine-tunes it
#    without pre-training again, to the same results.
source "$(dirname "$0")/sweep_common.sh"
source "$(dirname "$0")/slurm_lib.sh"
for tool in slurmctld slurmd munged sbatch; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
work=$(mktemp -d /tmp/cloze-sweep-slurm-ft-XXXXXX)
chmod 755 "$work"   # munged needs every directory above its socket searchable
ok=0
cleanup() { local rc=$?; slurm_stop; if [ $ok = 1 ]; then rm -rf "$work"; else echo "kept $work"; fi; exit $rc; }
trap cleanup EXIT
S=$work/sw
B=$work/slurm   # slurm_start sets it too; slurm_stop in cleanup needs it before
fail() { echo "FAIL: $*"; for f in "$S"/slurm/*.out; do echo "== $f"; cat "$f" || true; done; exit 1; }

ft_task "$work/task"
ft_spec "$work/ft.cfg" "$work/task" "1e-3"
SPEC=$work/ft.cfg
"$SWEEP" run "$SPEC" --dir "$work/local" "${SWEEP_ARGS[@]}" --quiet >"$work/local.log" 2>&1 ||
  { cat "$work/local.log"; fail "the local sweep"; }
slurm_start "$work/slurm" || exit 1

# submit_wait NAME: cloze-sweep submit (sweep_common.sh's sweep_submit: the
# ids in $array and $report), then waits for the report job
submit_wait() {
  sweep_submit "$work/$1.txt" "$SPEC" --dir "$S" "${SWEEP_ARGS[@]}" --max-parallel 1 || fail "$1"
  local state
  state=$(slurm_wait "$report")
  [ "$state" = COMPLETED ] || fail "$1: report job $report ended $state"
  grep -q "fine-tuning" "$S"/slurm/report-"$report".out && fail "the report job fine-tuned"
  return 0
}

# ft_ran POINT INDEX: the array task of point INDEX fine-tuned it in full
ft_ran() {
  local out=$S/slurm/task-${array}_$2.out d=$S/points/$1/finetune/tsv s
  [ -f "$out" ] || fail "no log of array task $2"
  grep -q "fine-tuning tsv: starting, 2 cloze-finetune run(s)" "$out" &&
    grep -q "fine-tuning tsv: dev accuracy .* (2 restarts" "$out" ||
    fail "array task $2 did not fine-tune $1"
  grep -q '"status":"done"' "$d/state.json" || fail "$1: tsv not done"
  for s in 1 2; do
    grep -q '"final"' "$d/lr0.001-b8-e6-s$s/results.jsonl" || fail "$1: restart $s did not run"
  done
}

submit_wait submit1
grep -q "(2 task(s): points 0-1," "$work/submit1.txt" || fail "not both points submitted"
names=($(csv_column "$S/results.csv" name))
[ ${#names[@]} = 2 ] || fail "results.csv has ${#names[@]} rows"
for i in 0 1; do ft_ran "${names[$i]}" $i; done
[ "$(csv_column "$S/results.csv" ft_tsv_n | sort -u)" = 2 ] || fail "ft_tsv_n is not the 2 restarts"
$PY "$SRC/tests/scripts/compare_results.py" "$work/local/results.csv" "$S/results.csv" \
  --ignore "$TIMING" --rows 2 || fail "Slurm and local results differ"

# ---- point 1's fine-tuning lost: a second submit fine-tunes it again
rm -r "$S/points/${names[1]}/finetune"
submit_wait submit2
grep -q "(1 task(s): points 1," "$work/submit2.txt" || fail "the second submit did not submit point 1 alone"
grep -q "pre-trained already" "$S/slurm/task-${array}_1.out" || fail "point 1 was pre-trained again"
ft_ran "${names[1]}" 1
$PY "$SRC/tests/scripts/compare_results.py" "$work/local/results.csv" "$S/results.csv" \
  --ignore "$TIMING" --rows 2 || fail "the second submit's results differ"
ok=1
echo "test_sweep_slurm_finetune: ok"
