#!/usr/bin/env bash
# cloze-sweep run, end to end on real 2-rank cloze-train jobs (the 2 x 2 grid
# of tests/sweeps/tiny.cfg at one FLOPs budget):
#  - a sweep killed with SIGKILL in the middle of a point (the sweep and its
#    mpirun and ranks at once), rerun, stopped by SIGINT in the middle of
#    another point, and rerun to the end gives a results.csv identical, timing
#    columns aside, to an uninterrupted sweep's; finished points are not rerun;
#  - the costs are the model's own: FLOPs per token x tokens = FLOPs, the FLOPs
#    per step are those cloze-train's MFU counts (read back from its
#    metrics.jsonl), the parameter count is the checkpoint's, the non-embedding
#    count matches the formula of the BERT layout;
#  - FLOPs budgets give steps = round(budget / FLOPs per step);
#  - a point that fails at run time (a corrupt manifest) and one whose
#    configuration is invalid are recorded with the reason, and the sweep goes
#    on; plan prices points with a probe; status counts the states;
#  - the shipped specs (conf/sweeps/) expand and price as documented.
set -euo pipefail
source "$(dirname "$0")/sweep_common.sh"
work=$(mktemp -d /tmp/cloze-sweep-XXXXXX)
ok=0
cleanup() {
  local rc=$?
  # the background sweep of a failed assertion, and whatever it started
  [ -n "${sid:-}" ] && pkill -KILL -s "$sid" 2>/dev/null
  if [ $ok = 1 ]; then rm -rf "$work"; else echo "kept $work"; fi
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

ref=$(reference_sweep)
[ "$(csv_column "$ref/results.csv" status | sort -u)" = done ] || fail "reference sweep not all done"
[ "$(csv_column "$ref/results.csv" name | wc -l)" = 4 ] || fail "reference sweep has not 4 rows"

# ---- interrupted twice, then finished ----
cut=$work/cut
# wait_mid_point NAME: until point NAME has a checkpoint but no result
wait_mid_point() {
  local d=$cut/points/$1 until=$((SECONDS + 300))  # a deadline, not a count: sanitizer builds are slow
  while [ $SECONDS -lt $until ]; do
    if ls "$d"/ckpt-*.lz4 >/dev/null 2>&1 && [ ! -e "$d/state.json" ]; then return 0; fi
    kill -0 "$pid" 2>/dev/null || fail "the sweep ended before $1 was under way"
    sleep 0.02
  done
  fail "$1 never got under way"
}
# 1. SIGKILL to the whole session: the sweep, mpirun and the ranks at once
setsid "$SWEEP" run "$SPEC" --dir "$cut" "${SWEEP_ARGS[@]}" > "$work/run1.log" 2>&1 &
pid=$! sid=$pid
wait_mid_point C4e10_L1_H64
pkill -KILL -s "$sid"
wait "$pid" 2>/dev/null || true
for _ in $(seq 100); do pgrep -s "$sid" >/dev/null || break; sleep 0.05; done
pgrep -s "$sid" >/dev/null && fail "processes of the killed sweep survive"
sid=
p1=$cut/points/C4e10_L1_H64
[ ! -e "$p1/state.json" ] || fail "the killed point has a result"
steps1=$(sed -n 's/^ *steps = \([0-9]*\)L;.*/\1/p' "$p1/point.cfg")
last=$(grep -o '"step":[0-9]*,"loss"' "$p1/metrics.jsonl" | tail -n1 | grep -o '[0-9]*' | sed -n 1p)
[ "$last" -lt "$steps1" ] || fail "the point was not killed in the middle ($last of $steps1 steps)"
[ -e "$cut/points/C4e10_L1_H32/state.json" ] || fail "the first point did not finish before the kill"
"$SWEEP" status "$SPEC" --dir "$cut" > "$work/status1.txt" || true
grep -q "C4e10_L1_H64 *interrupted" "$work/status1.txt" || { cat "$work/status1.txt"; fail "status does not show the interrupted point"; }
grep -q "1 done, 0 running, 1 interrupted, 0 failed, 0 invalid, 2 pending" "$work/status1.txt" ||
  { cat "$work/status1.txt"; fail "status counts"; }

# 2. SIGINT to the sweep alone (as Ctrl-C): it asks the point to checkpoint and stops
setsid "$SWEEP" run "$SPEC" --dir "$cut" > "$work/run2.log" 2>&1 &
pid=$! sid=$pid
wait_mid_point C4e10_L2_H32
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
sid=
[ "$rc" = 130 ] || { cat "$work/run2.log"; fail "a sweep stopped by SIGINT exits $rc, not 130"; }
grep -q "C4e10_L1_H32: done already, skipped" "$work/run2.log" || { cat "$work/run2.log"; fail "the finished point was not skipped"; }
grep -q "C4e10_L1_H64: resuming" "$work/run2.log" || { cat "$work/run2.log"; fail "the killed point was not resumed"; }
grep -q "interrupted: checkpointed" "$work/run2.log" || { cat "$work/run2.log"; fail "no interruption reported"; }
p2=$cut/points/C4e10_L2_H32
[ ! -e "$p2/state.json" ] || fail "the stopped point has a result"
grep -q '"outcome":"interrupted"' "$p2/attempts.jsonl" || fail "the stopped point's attempt is not recorded as interrupted"

# 3. to the end (no --set: the recorded ones are reused)
"$SWEEP" run "$SPEC" --dir "$cut" > "$work/run3.log" 2>&1 || { cat "$work/run3.log"; fail "the last run failed"; }
grep -q "4 of 4 point(s) done, 0 failed" "$work/run3.log" || { cat "$work/run3.log"; fail "not all done"; }
# finished points ran once: one attempt each for the points never interrupted
[ "$(grep -c '' "$cut/points/C4e10_L1_H32/attempts.jsonl")" = 1 ] || fail "a finished point was run again"
$PY "$SRC/tests/scripts/compare_results.py" "$ref/results.csv" "$cut/results.csv" --ignore "$TIMING" --rows 4
# and the jsonl twin holds the same rows
[ "$(grep -c '"status":"done"' "$cut/results.jsonl")" = 4 ] || fail "results.jsonl"
# a different --set on a started sweep is refused, naming the record
if "$SWEEP" run "$SPEC" --dir "$cut" --set optim.lr=0.5 > "$work/refuse.log" 2>&1; then fail "other --set accepted"; fi
grep -q "overrides.txt: this sweep was started with other --set" "$work/refuse.log" || { cat "$work/refuse.log"; fail "refusal message"; }

# ---- the costs are the model's own ----
$PY - "$ref" <<'EOF'
import csv, json, math, os, re, subprocess, sys
ref = sys.argv[1]
build = os.environ["CLOZE_BUILD_DIR"]
rows = list(csv.DictReader(open(os.path.join(ref, "results.csv"), newline="")))
vocab = None
for r in rows:
    d = os.path.join(ref, "points", r["name"])
    steps, tokens = int(r["steps"]), float(r["tokens"])
    fpt, ftot = float(r["flops_per_token"]), float(r["flops_total"])
    assert abs(fpt * tokens - ftot) <= 1e-9 * ftot, (r["name"], fpt, tokens, ftot)
    assert tokens == steps * 4 * 32, (r["name"], tokens, steps)
    # IsoFLOP budget 4e10: steps = round(4e10 / FLOPs per step)
    assert steps == round(4e10 / (ftot / steps)), (r["name"], steps, ftot)
    # cloze-train's MFU = FLOPs / (seconds x peak x ranks), peak 10 GFLOP/s, 2 ranks
    for line in open(os.path.join(d, "metrics.jsonl")):
        rec = json.loads(line)
        if "mfu" in rec and rec["step_seconds"] > 0:
            counted = rec["mfu"] * rec["step_seconds"] * 10e9 * 2
            assert abs(counted / (ftot / steps) - 1) < 1e-6, (r["name"], counted, ftot / steps)
    # the held-out columns: the final evaluation (at the last step) cloze-train wrote
    final = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))
             if '"eval_mlm_loss"' in l and json.loads(l)["step"] == steps][-1]
    assert float(r["eval_loss"]) == final["eval_mlm_loss"], (r["name"], r["eval_loss"], final)
    assert float(r["eval_mlm_acc"]) == final["eval_mlm_acc"], (r["name"], r["eval_mlm_acc"], final)
    assert float(r["eval_nsp_acc"]) == final["eval_nsp_acc"], (r["name"], r["eval_nsp_acc"], final)
    assert abs(float(r["eval_ppl"]) / math.exp(final["eval_mlm_loss"]) - 1) < 1e-9, r["eval_ppl"]
    # total parameters: the checkpoint's parameter blob
    ckpt = sorted(f for f in os.listdir(d) if f.startswith("ckpt-"))[-1]
    blob = subprocess.run([os.path.join(build, "cloze-ckpt"), "dump-blob", os.path.join(d, ckpt), "params"],
                          capture_output=True, check=True).stdout
    assert len(blob) == 4 * int(r["params"]), (r["name"], len(blob), r["params"])
    # non-embedding: total - token (V x H), position (512 x H), segment (2 x H) tables - MLM bias (V)
    cfg = open(os.path.join(d, "point.cfg")).read()
    V = int(re.search(r"vocab_size = (\d+);", cfg).group(1))
    H = int(r["model.hidden"])
    want = int(r["params"]) - V * H - 512 * H - 2 * H - V
    assert int(r["params_nonemb"]) == want, (r["name"], r["params_nonemb"], want)
    # and the formula of a BERT layer: 12 H^2 + 13 H per layer (+ heads, embedding LN)
    L = int(r["model.layers"])
    per_layer = 4 * H * H + 4 * H + 2 * H + 2 * (H * 4 * H) + 4 * H + H + 2 * H
    heads = (H * H + H) + 2 * H + (H * H + H) + (2 * H + 2)
    assert int(r["params_nonemb"]) == L * per_layer + heads + 2 * H, (r["name"], L * per_layer + heads + 2 * H)
print("costs: FLOPs = the MFU count, parameters = the checkpoint's, non-embedding = the layout's")
EOF

# ---- failures are recorded and the sweep goes on; plan and its probe ----
printf 'cloze-manifest 1\nshard missing.bin 1 1 1 0\n' > "$work/corrupt.manifest"
cat > "$work/faults.cfg" <<EOF
sweep:
{
  name = "faults";
  base = "$SRC/conf/bert-tiny.cfg";
  set = [ "data.seq=32", "data.max_pred=5", "train.global_batch=4", "train.micro_batch=2",
          "model.layers=1", "model.hidden=32", "model.heads=1", "model.intermediate=64",
          "train.peak_gflops=10", "optim.warmup_steps=0", "optim.warmup_fraction=0.1" ];
  axes = ( { keys = ["data.train_manifest", "data.seq"];
             values = ( ("$work/corrupt.manifest", 32), ("$DATA/shards/train.manifest", 32),
                        ("$DATA/shards/train.manifest", 1000) ); } );
  budget = { steps = [20]; };
  ranks = 2;
  threads = 1;
};
EOF
fargs=(--set "model.vocab_size=$(grep -c '' "$DATA/vocab.txt")" --set "data.heldout_manifest=$DATA/shards/heldout.manifest")
rc=0; "$SWEEP" plan "$work/faults.cfg" --dir "$work/faults" "${fargs[@]}" --probe 2 > "$work/plan.txt" 2>&1 || rc=$?
[ $rc = 1 ] || { cat "$work/plan.txt"; fail "plan of a spec with an invalid point exits $rc, not 1"; }
grep -q "data.seq = 1000 exceeds model.max_positions = 512" "$work/plan.txt" || { cat "$work/plan.txt"; fail "plan does not say why a point is invalid"; }
grep -q "estimated .* (1 point(s) timed by a probe" "$work/plan.txt" || { cat "$work/plan.txt"; fail "plan has no time estimate"; }
rc=0; "$SWEEP" run "$work/faults.cfg" --dir "$work/faults" "${fargs[@]}" > "$work/faults.log" 2>&1 || rc=$?
[ $rc = 1 ] || { cat "$work/faults.log"; fail "a sweep with failed points exits $rc, not 1"; }
$PY - "$work/faults/results.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert [r["status"] for r in rows] == ["failed", "done", "failed"], [r["status"] for r in rows]
assert "corrupt.manifest" in rows[0]["error"] or "missing.bin" in rows[0]["error"], rows[0]["error"]
assert "exceeds model.max_positions" in rows[2]["error"], rows[2]["error"]
assert rows[1]["eval_loss"] and float(rows[1]["eval_loss"]) > 0, rows[1]
print("failures recorded:", rows[0]["error"][:100], "|", rows[2]["error"][:80])
EOF
# ---- the shipped specs load, expand and price as documented ----
plan_of() { "$SWEEP" plan "$SRC/conf/sweeps/$1.cfg" --dir "$work/plan-$1" --probe 0 \
  --set "data.heldout_manifest=$DATA/shards/heldout.manifest" > "$work/plan-$1.txt" 2>&1 ||
  { cat "$work/plan-$1.txt"; fail "plan of conf/sweeps/$1.cfg"; }; }
plan_of table6-mini
grep -q "total: 18 valid point(s)" "$work/plan-table6-mini.txt" || { cat "$work/plan-table6-mini.txt"; fail "table6-mini"; }
plan_of gpt-grid
grep -q "total: 27 valid point(s)" "$work/plan-gpt-grid.txt" || { cat "$work/plan-gpt-grid.txt"; fail "gpt-grid"; }
plan_of table6
# the paper's BERT-base (12/768/12) and BERT-large (24/1024/16): 110M and 340M parameters
grep -Eq "S1e6_L12_H768_A12 +12 +768 +12 +86.2M +110M " "$work/plan-table6.txt" &&
  grep -Eq "S1e6_L24_H1024_A16 +24 +1024 +16 +304M +336M " "$work/plan-table6.txt" ||
  { cat "$work/plan-table6.txt"; fail "table6's BERT-base / BERT-large sizes"; }
# the paper's fine-tuning protocol per point: 3 tasks x 18 configurations x 5 restarts
grep -q "fine-tuning per point .*: mnli 18 configuration(s) x 5 restart(s), mrpc 18 .*; 270 run(s) per point, 1620 in all" \
  "$work/plan-table6.txt" || { cat "$work/plan-table6.txt"; fail "plan does not count table6's fine-tuning runs"; }
ok=1
echo "test_sweep: ok"
