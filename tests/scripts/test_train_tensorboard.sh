#!/usr/bin/env bash
# TensorBoard event files of cloze-train and cloze-finetune, read by the
# real tensorboard package (tests/scripts/check_tfevents.py: its CRC-checked
# record reader and EventAccumulator): every scalar equals metrics.jsonl's
# (results.jsonl's dev scores) as a float32, and each tag's steps strictly
# increase across resumes that redo steps. Between the slices of the run a
# killed job is imitated twice: a partial record at the end of the events
# file, then a damaged byte in its last record; neither stops the resumed
# run, which says in one warning what it cut. train.tensorboard=false
# (cloze-finetune --no-tensorboard) writes no event file.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-tensorboard-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
TBPY=$("$SRC/tests/scripts/tb_venv.sh" "$CLOZE_BUILD_DIR/tb-venv") || exit $?
run=$work/run
args() { tiny_args "$data" "$run"; echo --set data.heldout_manifest="$data/shards/heldout.manifest" \
  --set train.steps=12 --set train.global_batch=4 --set train.micro_batch=2 \
  --set train.ckpt_every=3 --set train.keep_last=10 --set train.eval_every=3 \
  --set train.eval_batches=2; }
events() { ls "$run"/events.out.tfevents.* | tail -1; }

# slice 1: steps 1..5 (checkpoints 3 and 5); the checkpoint at 5 lost, so
# the next slice redoes 4 and 5; a partial record at the end of the file
mpi 1 "$BIN/cloze-train" $(args) --set train.stop_after_steps=5
rm "$run/ckpt-00000005.lz4"
printf '\x30\x00\x00\x00\x00' >>"$(events)"
# slice 2: resumed at 3, steps 4..7; the checkpoint at 7 lost; a damaged
# byte in the last record (step 7's)
mpi 1 "$BIN/cloze-train" $(args) --resume auto --set train.stop_after_steps=4 2>"$work/s2.log" ||
  { cat "$work/s2.log"; fail "a partial event record stopped the resumed run"; }
rm "$run/ckpt-00000007.lz4"
f=$(events)
printf '\x55' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 8)) conv=notrunc 2>/dev/null
# slice 3: resumed at 6, to the end
mpi 1 "$BIN/cloze-train" $(args) --resume auto 2>"$work/s3.log" ||
  { cat "$work/s3.log"; fail "a damaged event record stopped the resumed run"; }
grep -q "events.out.tfevents.*damaged or partial record.*cut there, the run goes on" "$work/s3.log" ||
  { cat "$work/s3.log"; fail "the damaged record was not reported"; }
[ "$(grep -c "damaged or partial" "$work/s3.log")" = 1 ] || fail "the damage was reported more than once"
"$TBPY" "$SRC/tests/scripts/check_tfevents.py" "$run" --files 3 --steps 12 --evals 0,3,6,9,12

# off: no event file
mpi 1 "$BIN/cloze-train" $(tiny_args "$data" "$work/off") --set train.steps=4 \
  --set train.global_batch=4 --set train.micro_batch=2 --set train.tensorboard=false
! ls "$work/off"/events.out.tfevents.* 2>/dev/null || fail "train.tensorboard=false wrote events"

# cloze-finetune on 2 ranks (rank 0 writes): its steps and dev scores
$PY "$SRC/tests/finetune/make_tasks.py" "$data/corpus.txt" "$work/tasks"
mpi 2 "$BIN/cloze-finetune" run --init "$run/ckpt-00000012.lz4" --out "$work/ft" --threads 1 --quiet \
  --task tsv --text-a sentence --label label --train "$work/tasks/cls_train.tsv" \
  --dev "$work/tasks/cls_dev.tsv" --max-seq 32 --batch 32 --epochs 2 --eval-every-epoch --lr 1e-3
"$TBPY" "$SRC/tests/scripts/check_tfevents.py" "$work/ft" --files 1 --results
mpi 1 "$BIN/cloze-finetune" run --init "$run/ckpt-00000012.lz4" --out "$work/ft-off" --threads 1 \
  --quiet --task tsv --text-a sentence --label label --train "$work/tasks/cls_train.tsv" \
  --dev "$work/tasks/cls_dev.tsv" --max-seq 32 --batch 32 --epochs 1 --lr 1e-3 --no-tensorboard
! ls "$work/ft-off"/events.out.tfevents.* 2>/dev/null || fail "cloze-finetune --no-tensorboard wrote events"
echo "ok: event files of 3 slices and of a fine-tuning run read by tensorboard"
