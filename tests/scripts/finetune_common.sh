# Shared by the fine-tuning tests (test_finetune.sh, test_finetune_predict.sh):
# a work directory removed on exit (kept with CLOZE_KEEP_WORK=1; its name
# from FT_WORK), the training tests' corpus, a BERT-tiny pre-trained for 10
# steps ($bert), the tasks of tests/finetune/make_tasks.py in $work/tasks,
# and ft NP OUT ARGS...: one cloze-finetune run from $bert on NP ranks, its
# log in OUT.log.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"
work=$(mktemp -d "/tmp/cloze-${FT_WORK:-ft}-XXXXXX")
trap "${CLOZE_KEEP_WORK:+:} rm -rf \"$work\"" EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
fail() { echo "FAIL: $*"; exit 1; }
FT=$BIN/cloze-finetune
last_ckpt() { ls "$1"/ckpt-*.lz4 | tail -1; }

# ---- the pre-trained model (a few steps: the point is the plumbing)
mpi 1 "$BIN/cloze-train" $(tiny_args "$data" "$work/bert") --set train.steps=10 \
  --set train.global_batch=4 --set train.micro_batch=4 2>"$work/bert.log" ||
  { cat "$work/bert.log"; fail "cloze-train BERT"; }
bert=$(last_ckpt "$work/bert")
$PY "$SRC/tests/finetune/make_tasks.py" "$data/corpus.txt" "$work/tasks"

ft() { # np out args...
  local np=$1 out=$2
  shift 2
  mpi "$np" "$FT" run --init "$bert" --out "$out" --threads 1 --quiet "$@" 2>"$out.log" ||
    { cat "$out.log"; fail "cloze-finetune run $*"; }
}
