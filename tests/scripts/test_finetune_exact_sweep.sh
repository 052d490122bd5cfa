#!/usr/bin/env bash
# A sweep point pre-trained with dist.exact = true fine-tunes with --exact
# (src/sweep/ft_run.c): the same one-point sweep of a tiny BERT with its
# fine-tuning grid (one configuration, one restart) run with ranks = 1 and
# with ranks = 2 ends with byte-identical pre-trained and fine-tuned params
# and the same ft_tsv cell, and the task's recorded arguments carry --exact.
# Not vacuous: without --exact the fine-tuning's micro-batch follows the rank
# count (8 examples on 1 rank, 4 on 2) and its sums are fp32 ones, so the
# fine-tuned params of the two sweeps differ (checked by building
# ft_run.c without the pass-through: this test then fails at "fine-tuned
# params differ").
set -euo pipefail
source "$(dirname "$0")/sweep_common.sh"
work=$(mktemp -d /tmp/cloze-ftx-sweep-XXXXXX)
trap "${CLOZE_KEEP_WORK:+:} rm -rf \"$work\"" EXIT
fail() { echo "FAIL: $*"; exit 1; }
ft_task "$work/task"
spec() { # spec FILE RANKS
  cat >"$1" <<EOF
sweep:
{
  name = "exact-ft";
  base = "$SRC/conf/bert-tiny.cfg";
  set = [ "data.seq=32", "data.max_pred=5", "train.global_batch=4", "train.micro_batch=2",
          "train.ckpt_every=20", "train.log_every=100", "optim.lr=1e-3",
          "optim.warmup_steps=0", "optim.warmup_fraction=0.1", "model.layers=1",
          "dist.exact=true", "dist.calibrate=false" ];
  axes = ( { key = "model.hidden"; values = [32]; } );
  budget = { steps = [20]; };
  eval = { batches = 2; };
  ranks = $2;
  threads = 1;
  finetune = (
    { task = "tsv"; data = "$work/task"; restarts = 1;
      grid = { lr = [3e-3]; batch = [8]; epochs = [2]; };
      args = [ "--text-a", "sentence", "--label", "label", "--max-seq", "32", "--quiet" ]; }
  );
};
EOF
}
for n in 1 2; do
  spec "$work/np$n.cfg" $n
  "$SWEEP" run "$work/np$n.cfg" --dir "$work/s$n" "${SWEEP_ARGS[@]}" --quiet >"$work/s$n.log" 2>&1 ||
    { cat "$work/s$n.log"; fail "the sweep on $n rank(s)"; }
done
p=$(csv_column "$work/s1/results.csv" name)
[ "$(csv_column "$work/s1/results.csv" status)" = done ] || fail "the point is not done"
grep -qx -- --exact "$work/s2/points/$p/finetune/tsv/args.txt" ||
  fail "the point's fine-tuning was not run with --exact"
params() { "$BIN/cloze-ckpt" dump-blob "$1" params | sha256sum; }
[ "$(params "$work/s1/points/$p/ckpt-00000020.lz4")" = "$(params "$work/s2/points/$p/ckpt-00000020.lz4")" ] ||
  fail "pre-trained params differ between 1 and 2 ranks"
ft1=$(ls "$work"/s1/points/$p/finetune/tsv/lr*/ckpt-*.lz4)
ft2=$(ls "$work"/s2/points/$p/finetune/tsv/lr*/ckpt-*.lz4)
[ "$(params "$ft1")" = "$(params "$ft2")" ] || fail "fine-tuned params differ between 1 and 2 ranks"
a=$(csv_column "$work/s1/results.csv" ft_tsv)
b=$(csv_column "$work/s2/results.csv" ft_tsv)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "ft_tsv: '$a' on 1 rank, '$b' on 2"
echo "sweep with dist.exact: 1 and 2 ranks fine-tune to the same params (ft_tsv $a)"
