# Shared by the sweep tests: the tiny 2 x 2 sweep (tests/sweeps/tiny.cfg) on
# the training tests' corpus, and helpers to read its results.
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"
SWEEP=$BIN/cloze-sweep
SPEC=$SRC/tests/sweeps/tiny.cfg
DATA=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$DATA"
# the --set every command of the tiny sweep gives
SWEEP_ARGS=(--set "model.vocab_size=$(grep -c '' "$DATA/vocab.txt")"
            --set "data.train_manifest=$DATA/shards/train.manifest"
            --set "data.heldout_manifest=$DATA/shards/heldout.manifest")
TIMING=wall_s,train_s,tokens_per_s,mfu

# csv_column FILE COLUMN: that column's cells, one per line. Read all of it
# (sed -n 1p, not head): under pipefail a reader that stops early makes the
# writer's next print fail with EPIPE, and the pipeline with it
csv_column() {
  $PY - "$1" "$2" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
for r in rows:
    print(r[sys.argv[2]])
EOF
}

# the uninterrupted reference sweep, run once per build directory and reused
# by the tests that compare against it
reference_sweep() {
  local ref=$CLOZE_BUILD_DIR/test-data/sweep-reference
  exec 8>"$CLOZE_BUILD_DIR/test-data/.sweep-reference.lock"
  flock 8
  local f stale=0
  for f in "$SWEEP" "$BIN/cloze-train" "$SPEC" "$SRC/conf/bert-tiny.cfg"; do
    [ -s "$ref/done" ] && [ ! "$ref/done" -ot "$f" ] || stale=1
  done
  if [ $stale = 1 ]; then
    rm -rf "$ref"
    "$SWEEP" run "$SPEC" --dir "$ref" "${SWEEP_ARGS[@]}" --quiet > "$CLOZE_BUILD_DIR/test-data/sweep-reference.log" ||
      { cat "$CLOZE_BUILD_DIR/test-data/sweep-reference.log"; flock -u 8; return 1; }
    echo ok > "$ref/done"
  fi
  flock -u 8
  echo "$ref"
}
