#!/usr/bin/env bash
# A sweep point gives the same results.csv row on any ranks per point when
# it sums exactly (dist.exact = true): a 2-point spec (an axis over
# dist.exact, true and false; tiny BERT, 20 steps of 4 micro-batches, an
# evaluation at the end) run with `cloze-sweep run -n 1` and with `-n 2`.
#  - the dist.exact = true row is the same text, timing columns aside
#    (wall_s, train_s, tokens_per_s, mfu: src/sweep/results.c's
#    cz_sweep_timing_columns), and so are the point's last checkpoint's
#    params, adam_m and adam_v blobs, bit for bit: results.csv prints 10
#    significant digits, which could hide a difference in the last bits;
#  - not vacuous: the same comparisons of the dist.exact = false point fail
#    (the fp32 sums' order follows the ranks: 4 micro-batches added in turn
#    on one rank, two by two then across the ranks on two): its checkpoint
#    differs, and so does its row, in eval_loss's last printed digit
#    (6.62348274 against 6.62348275 here; the other columns are equal).
set -euo pipefail
source "$(dirname "$0")/sweep_common.sh"
work=$(mktemp -d /tmp/cloze-sweep-exact-XXXXXX)
ok=0
trap '[ $ok = 1 ] && rm -rf "$work" || echo "kept $work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
t0=$SECONDS
cat >"$work/spec.cfg" <<CFG
sweep:
{
  name = "exact";
  base = "$SRC/conf/bert-tiny.cfg";
  set = [ "data.seq=32", "data.max_pred=5", "train.global_batch=4", "train.micro_batch=1",
          "train.ckpt_every=20", "train.log_every=100", "train.peak_gflops=10",
          "optim.lr=1e-3", "optim.warmup_steps=0", "optim.warmup_fraction=0.1",
          "model.layers=1", "model.hidden=32", "dist.calibrate=false" ];
  axes = ( { key = "dist.exact"; values = [true, false]; } );
  budget = { steps = [20]; };
  eval = { batches = 4; };
  threads = 1;
};
CFG
for n in 1 2; do
  "$SWEEP" run "$work/spec.cfg" --dir "$work/np$n" -n $n "${SWEEP_ARGS[@]}" --quiet \
    >"$work/np$n.log" 2>&1 || { cat "$work/np$n.log"; fail "the sweep on $n rank(s) per point"; }
done
grep -q "gradient all-reduce: .* on 2 ranks" "$work"/np2/points/*/train.log ||
  fail "the -n 2 sweep's points did not run on 2 ranks"
# row ROWS_CSV EXACT: that point's row, timing columns out, one cell a line
row() {
  $PY - "$1" "$2" "$TIMING" <<'EOF'
import csv, sys
timing = set(sys.argv[3].split(","))
rows = [r for r in csv.DictReader(open(sys.argv[1], newline="")) if r["dist.exact"] == sys.argv[2]]
assert len(rows) == 1, f"{len(rows)} rows with dist.exact = {sys.argv[2]}"
for k, v in rows[0].items():
    if k not in timing:
        print(f"{k}={v}")
EOF
}
# blobs SWEEP_DIR EXACT: the point's last checkpoint's params, adam_m, adam_v
blobs() {
  local d b
  d=$(dirname "$(grep -l "exact *= *$2" "$1"/points/*/point.cfg)")
  for b in params adam_m adam_v; do
    "$BIN/cloze-ckpt" dump-blob "$d/ckpt-00000020.lz4" $b | sha256sum
  done
}
row "$work/np1/results.csv" true >"$work/exact1"
row "$work/np2/results.csv" true >"$work/exact2"
grep -q '^status=done$' "$work/exact1" || { cat "$work/exact1"; fail "the exact point did not finish"; }
grep -q '^eval_loss=[0-9]' "$work/exact1" || { cat "$work/exact1"; fail "no eval_loss"; }
diff "$work/exact1" "$work/exact2" || fail "dist.exact = true: 1 and 2 ranks per point give other rows"
[ "$(blobs "$work/np1" true)" = "$(blobs "$work/np2" true)" ] ||
  fail "dist.exact = true: the checkpoints of 1 and 2 ranks per point differ"
echo "dist.exact = true: the same row and checkpoint on 1 and 2 ranks per point"
sed -n 's/^eval_loss=/  eval_loss /p' "$work/exact1"
# not vacuous: without exact sums the two differ, in the row and the bits
row "$work/np1/results.csv" false >"$work/plain1"
row "$work/np2/results.csv" false >"$work/plain2"
if diff "$work/plain1" "$work/plain2" >"$work/plain.diff"; then
  fail "dist.exact = false: the same row on 1 and 2 ranks: the test cannot tell"
fi
grep -q eval_loss "$work/plain.diff" || { cat "$work/plain.diff"; fail "dist.exact = false: eval_loss does not differ"; }
[ "$(blobs "$work/np1" false)" != "$(blobs "$work/np2" false)" ] ||
  fail "dist.exact = false: the same checkpoint on 1 and 2 ranks: the test cannot tell"
echo "dist.exact = false: 1 and 2 ranks per point differ (as expected):"
grep eval_loss "$work/plain.diff"
ok=1
echo "test_sweep_exact: ok ($((SECONDS - t0)) s)"
