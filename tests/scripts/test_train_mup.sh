#!/usr/bin/env bash
# µP (model.parametrization = mup) through training, checkpoints and resume,
# on the small BERT of the training tests at hidden 32 over base width 16
# (every multiplier in play): for each optimizer placement a run stopped
# after 4 of 8 steps and resumed prints the same losses to the last digit as
# an uninterrupted one, and the checkpoints keep the optimizer's
# multipliers (blob multipliers); the three placements end with the
# same parameters bit for bit; a 2-rank checkpoint resumes on 1 rank; a
# checkpoint of one parametrization given to a run of the other is refused
# in one line naming model.parametrization, even with --allow-config-change
# (and as model.init_from); export-hf refuses it, saying why. At the base width (mup_base_width = hidden) the
# run is the standard one bit for bit; at 2x it is not. GPT-2's layout under
# µP: 1 and 2 ranks agree, the loss falls.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-mup-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
mup="--set model.parametrization=mup --set model.mup_base_width=16"
common() { tiny_args "$data" "$1"; echo --set train.steps=8 --set train.global_batch=4 \
  --set train.micro_batch=2 --set train.ckpt_every=4 --set train.keep_last=10 \
  --set optim.weight_decay=0.01; }
fail() { echo "FAIL: $*"; exit 1; }
for place in coordinator sharded replicated; do
  mpi 2 "$BIN/cloze-train" $(common "$work/full-$place") $mup --set dist.placement=$place
  mpi 2 "$BIN/cloze-train" $(common "$work/cut-$place") $mup --set dist.placement=$place \
    --set train.stop_after_steps=4
  mpi 2 "$BIN/cloze-train" $(common "$work/cut-$place") $mup --set dist.placement=$place \
    --resume auto
  $PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-$place/metrics.jsonl" \
    "$work/cut-$place/metrics.jsonl" --exact --fields loss,mlm_loss,nsp_loss,grad_norm,lr
  "$BIN/cloze-ckpt" dump-blob "$work/full-$place/ckpt-00000008.lz4" params > "$work/p-$place"
done
cmp "$work/p-coordinator" "$work/p-sharded" && cmp "$work/p-coordinator" "$work/p-replicated" ||
  fail "the placements end with different µP parameters"
# the multipliers in the checkpoint: (lr, wd) per tensor, lr / 2 and wd x 2
# on the matrix-like ones, 1 elsewhere
"$BIN/cloze-ckpt" dump-blob "$work/full-sharded/ckpt-00000004.lz4" multipliers > "$work/mult"
$PY - "$work/mult" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
v = struct.unpack("<%dd" % (len(b) // 8), b)
pairs = sorted(set(zip(v[0::2], v[1::2])))
print("multipliers: %d tensors, (lr, wd) multipliers %s" % (len(v) // 2, pairs))
assert pairs == [(0.5, 2.0), (1.0, 1.0)], pairs
PY
# another rank count: the 2-rank step-4 checkpoint resumed on 1 rank
mkdir -p "$work/one"
cp "$work/full-sharded/ckpt-00000004.lz4" "$work/one/"
mpi 1 "$BIN/cloze-train" $(common "$work/one") $mup --set dist.placement=sharded --resume auto
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/full-sharded/metrics.jsonl" \
  "$work/one/metrics.jsonl" --rel 1e-5 --from 5 --fields loss,mlm_loss,nsp_loss

# the other parametrization: refused, naming the key, --allow-config-change or not
for extra in "" "--allow-config-change"; do
  mkdir -p "$work/std$extra"
  cp "$work/full-sharded/ckpt-00000004.lz4" "$work/std$extra/"
  if mpi 1 "$BIN/cloze-train" $(common "$work/std$extra") $extra --resume auto \
       2> "$work/std.log"; then
    fail "a µP checkpoint resumed a standard run $extra"
  fi
  grep -q "model.parametrization" "$work/std.log" || { cat "$work/std.log"; fail "key not named"; }
  [ "$(grep -c 'error:.*model.parametrization' "$work/std.log")" = 1 ] || { cat "$work/std.log"; fail "the refusal does not name model.parametrization exactly once"; }
done
if mpi 1 "$BIN/cloze-train" $(common "$work/init") \
     --set model.init_from="$work/full-sharded/ckpt-00000008.lz4" 2> "$work/init.log"; then
  fail "a µP checkpoint initialised a standard run"
fi
grep -q "model.parametrization: the checkpoint's run is mup, this run standard" "$work/init.log" ||
  { cat "$work/init.log"; fail "init_from refusal"; }

# a Hugging Face export of µP at 2x its base: refused, saying what it would need
if "$BIN/cloze-ckpt" export-hf "$work/full-sharded/ckpt-00000008.lz4" "$work/hf" 2> "$work/hf.log"; then
  fail "export-hf wrote a µP model"
fi
grep -q "model.parametrization = mup: outside cloze this model needs its logits multiplied by 0.5" \
  "$work/hf.log" || { cat "$work/hf.log"; fail "export refusal"; }
[ ! -e "$work/hf/model.safetensors" ] || fail "export-hf left a model behind"

# at the base width µP is the standard model; at 2x it is not
mpi 1 "$BIN/cloze-train" $(common "$work/std1") --set train.stop_after_steps=4
mpi 1 "$BIN/cloze-train" $(common "$work/base1") --set train.stop_after_steps=4 \
  --set model.parametrization=mup --set model.mup_base_width=32
cmp <("$BIN/cloze-ckpt" dump-blob "$work/std1/ckpt-00000004.lz4" params) \
    <("$BIN/cloze-ckpt" dump-blob "$work/base1/ckpt-00000004.lz4" params) ||
  fail "µP at its base width is not the standard run"
if cmp -s <("$BIN/cloze-ckpt" dump-blob "$work/std1/ckpt-00000004.lz4" params) \
          <("$BIN/cloze-ckpt" dump-blob "$work/full-sharded/ckpt-00000004.lz4" params); then
  fail "µP at 2x its base width changed nothing"
fi
# GPT-2's layout under µP (hidden 32 on base 16, a byte-level BPE vocabulary):
# 1 rank x accumulation 2 and 2 ranks x 1 (sharded) agree to 1e-5, as the
# standard runs of test_train_gpt2 do, and the loss falls
mkdir -p "$work/bpe"
vocab_size=$(bpe_shards "$data/corpus.txt" "$work/bpe")
gpt2() { # gpt2 RUN_DIR RANKS
  mpi "$2" "$BIN/cloze-train" "$SRC/conf/gpt2-mini.cfg" --set model.vocab_size=$vocab_size \
    --set model.layers=2 --set model.hidden=32 --set model.heads=2 --set model.max_positions=32 \
    --set data.seq=32 --set data.train_manifest="$work/bpe/shards/train.manifest" \
    --set train.run_dir="$1" --set train.steps=10 --set train.global_batch=4 \
    --set train.micro_batch=2 --set train.threads=1 --set train.eval_every=0 \
    --set train.peak_gflops=10 --set optim.lr=3e-3 --set optim.warmup_steps=2 \
    --set train.log_every=1 --set dist.placement=sharded $mup --quiet
}
gpt2 "$work/g1" 1
gpt2 "$work/g2" 2
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/g1/metrics.jsonl" "$work/g2/metrics.jsonl" \
  --rel 1e-5 --fields loss,lm_loss,grad_norm
$PY - "$work/g1/metrics.jsonl" <<'PY'
import json, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l]
print(f"gpt2 µP: loss {loss[0]:.4f} -> {loss[-1]:.4f}")
assert loss[-1] < loss[0] - 0.1, loss
PY
echo "test_train_mup: ok"
