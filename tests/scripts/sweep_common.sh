# Shared by the sweep tests: the tiny 2 x 2 sweep (tests/sweeps/tiny.cfg) on
# the training tests' corpus, and helpers to read its results.
set -euo pipefail
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
  for f in "$SWEEP" "$BIN/cloze-train" "$SPEC" "$SRC/conf/bert-tiny.cfg" "$DATA/shards/train.manifest"; do
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

# sweep_submit OUT SUBMIT_ARGS...: cloze-sweep submit, its output into OUT
# (and printed); the array and report jobs' ids into $array and $report
sweep_submit() {
  local out=$1
  shift
  "$SWEEP" submit "$@" >"$out" || { cat "$out"; echo "submit failed"; return 1; }
  cat "$out"
  array=$(sed -n 's/^submitted array job \([0-9]*\) .*/\1/p' "$out")
  report=$(sed -n 's/.* report job \([0-9]*\) .*/\1/p' "$out")
  [ -n "$array" ] && [ -n "$report" ] || { echo "no job ids in $out"; return 1; }
}

# ---- fine-tuning per point (test_sweep_finetune, test_sweep_slurm_finetune)

# ft_task DIR: a two-class TSV task of corpus words in DIR (train.tsv: 128
# sentences, dev.tsv: 48), label 1 when the sentence holds the first of two
# vocabulary words, 0 when it holds the second
ft_task() {
  $PY - "$DATA/corpus.txt" "$DATA/vocab.txt" "$1" <<'EOF'
import os, random, sys
corpus, vocab, out = sys.argv[1:]
words = [w for line in open(corpus, encoding="utf-8") for w in line.split() if w.isalpha()]
known = [w.strip() for w in open(vocab, encoding="utf-8")]
markers = [w for w in known if w.isalpha() and w.islower() and len(w) > 3][:2]
rng = random.Random(7)
os.makedirs(out, exist_ok=True)
for name, n in (("train.tsv", 128), ("dev.tsv", 48)):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        for i in range(n):
            label = i % 2
            s = rng.sample(words, 6)
            s.insert(rng.randrange(7), markers[1 - label])
            f.write(" ".join(s) + "\t%d\n" % label)
EOF
  [ "$(grep -c '' "$1/dev.tsv")" = 49 ] || { echo "FAIL: ft_task: $1/dev.tsv" >&2; return 1; }
}

# ft_spec FILE TASK_DIR LRS [MORE [RESTARTS]]: a 1 x 2 sweep of tiny BERTs
# (depth 1, width 32 and 64, 30 steps of 2 ranks x 1 thread), each point
# fine-tuned on ft_task's task ("tsv") over the learning rates LRS ("1e-3,
# 3e-3") x batch 8 x 6 epochs x RESTARTS (2) restarts; MORE: further
# finetune entries (", { ... }")
FT_ARGS=(--text-a sentence --label label --max-seq 32 --quiet)
ft_spec() {
  local args="" a
  for a in "${FT_ARGS[@]}"; do args+="${args:+, }\"$a\""; done
  cat >"$1" <<EOF
sweep:
{
  name = "tiny-ft";
  base = "$SRC/conf/bert-tiny.cfg";
  set = [ "data.seq=32", "data.max_pred=5", "train.global_batch=4", "train.micro_batch=2",
          "train.ckpt_every=20", "train.log_every=100", "optim.lr=1e-3",
          "optim.warmup_steps=0", "optim.warmup_fraction=0.1", "model.layers=1" ];
  axes = ( { key = "model.hidden"; values = [32, 64]; } );
  budget = { steps = [30]; };
  eval = { batches = 2; };
  ranks = 2;
  threads = 1;
  finetune = (
    { task = "tsv"; data = "$2"; restarts = ${5:-2};
      grid = { lr = [$3]; batch = [8]; epochs = [6]; };
      args = [ $args ]; }${4:-}
  );
};
EOF
}

# ---- Slurm (test_sweep_slurm, test_sweep_slurm_finetune)

# slurm_rerun_wait JOB: waits (at most a minute) until JOB, which is to
# requeue itself, has run again; 1 if it ended without a requeue or did not
# run again. Slurm holds a requeued job until its credential expires
# (slurm_lib.sh's cred_expire: 5 s), then starts it at its next periodic
# scheduling pass (21 s later here); `scontrol update StartTime=now` once it
# is eligible asks for that pass at once
slurm_rerun_wait() {
  local info state reason start restarts
  for _ in $(seq 300); do
    info=$(scontrol show job "$1" 2>/dev/null) || info=
    state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
    reason=$(sed -n 's/.* Reason=\([A-Za-z_]*\).*/\1/p' <<<"$info")
    start=$(sed -n 's/.* StartTime=\([^ ]*\).*/\1/p' <<<"$info")
    restarts=$(sed -n 's/.* Restarts=\([0-9]*\).*/\1/p' <<<"$info")
    case "${restarts:-0}:$state" in
      0:PENDING | 0:RUNNING | 0:COMPLETING | 0: | *:PENDING | *:REQUEUED | *:COMPLETING) ;;
      0:*) echo "job $1 ended $state without a requeue"; return 1 ;;
      *) return 0 ;;
    esac
    if [ "$state" = PENDING ] && [ "$reason" = BeginTime ] && [ "$start" = Unknown ]; then
      scontrol update jobid="$1" StartTime=now 2>/dev/null || true
    fi
    sleep 0.2
  done
  echo "job $1 did not run again after its requeue: $info"
  return 1
}
