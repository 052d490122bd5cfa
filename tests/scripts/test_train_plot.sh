#!/usr/bin/env bash
# cloze-train plot: on a real run's metrics.jsonl (a BERT-tiny with held-out
# evaluations, stopped and resumed so that steps were redone) it writes a
# PNG and an SVG that decode to a drawn figure (tests/scripts/check_images.py)
# and the gnuplot script that redraws them; on a file without step records,
# and on a run directory without metrics.jsonl, it says so in one line and
# exits non-zero; its --help names its options.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-plot-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed (gnuplot-nox)"; exit 77; }
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
run=$work/run
args() { tiny_args "$data" "$run"; echo --set data.heldout_manifest="$data/shards/heldout.manifest" \
  --set train.steps=60 --set train.global_batch=4 --set train.micro_batch=2 \
  --set train.ckpt_every=10 --set train.eval_every=10 --set train.eval_batches=2; }
mpi 1 "$BIN/cloze-train" $(args) --set train.stop_after_steps=25
rm "$run/ckpt-00000025.lz4"
mpi 1 "$BIN/cloze-train" $(args) --resume auto

"$BIN/cloze-train" plot "$run" >"$work/plot.out" || fail "cloze-train plot on a real run"
grep -q "wrote $run/curves.png and .svg" "$work/plot.out" || { cat "$work/plot.out"; fail "no summary line"; }
$PY "$SRC/tests/scripts/check_images.py" --size=1000x1000 "$run" curves
# the figure's data: each step's value of the last attempt, and beside it the
# bias-corrected moving average over about steps/50 steps, computed again here
$PY - "$run" <<'PY' || fail "the figure's data differ from metrics.jsonl"
import json, math, re, sys
run = sys.argv[1]
last, records = {}, 0
for line in open(f"{run}/metrics.jsonl"):
    r = json.loads(line)
    if "loss" in r:
        records += 1
        last[r["step"]] = r["mlm_loss"]
gp = open(f"{run}/curves.gp").read()
rows = [l.split() for l in re.search(r"\$s0 << EOD\n(.*?)EOD", gp, re.S).group(1).splitlines()]
steps = sorted(last)
assert [int(r[0]) for r in rows] == steps, "steps"
b, ema = 1 - 1 / (records / 50), 0.0
for n, (r, s) in enumerate(zip(rows, steps), 1):
    assert float(r[1]) == last[s], (s, r[1], last[s])
    ema = b * ema + (1 - b) * last[s]
    want = ema / (1 - b ** n)
    assert math.isclose(float(r[2]), want, rel_tol=1e-7), (s, r[2], want)
print(f"ok: {len(rows)} steps of training MLM loss and their average (span {records / 50:.2f})")
PY
# --out, and the script redraws what it drew
"$BIN/cloze-train" plot "$run" --out "$work/again" >/dev/null
rm "$work/again.png" "$work/again.svg"
(cd "$work" && gnuplot again.gp)
$PY "$SRC/tests/scripts/check_images.py" --size=1000x1000 "$work" again

# no step records: one line, exit 1, nothing drawn
mkdir -p "$work/empty"
echo '{"resumed":true,"step":0,"samples_done":0,"ranks":1}' >"$work/empty/metrics.jsonl"
rc=0
"$BIN/cloze-train" plot "$work/empty" >"$work/empty.out" 2>"$work/empty.err" || rc=$?
[ $rc = 1 ] || fail "exit $rc on a file without step records"
[ "$(wc -l <"$work/empty.err")" = 1 ] && grep -q "metrics.jsonl: no step records" "$work/empty.err" ||
  { cat "$work/empty.err"; fail "not one line saying there are no step records"; }
! ls "$work/empty"/curves.* 2>/dev/null || fail "files written for an empty run"
# no metrics.jsonl at all
rc=0
"$BIN/cloze-train" plot "$work/none" 2>"$work/none.err" || rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$work/none.err")" = 1 ] && grep -q "none/metrics.jsonl: cannot open" "$work/none.err" ||
  { cat "$work/none.err"; fail "a missing metrics.jsonl: exit $rc"; }
"$BIN/cloze-train" plot --help | grep -q -- "--out PREFIX" || fail "plot --help lacks --out"
echo "ok: cloze-train plot draws a real run and refuses an empty one in one line"
