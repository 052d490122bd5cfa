#!/usr/bin/env bash
# dist.exact = true: one run, any allocation. A small BERT (post-LN) and a
# small GPT-2 layout (pre-LN), in fp32 and in bf16 products (where the CPU
# has AVX512_BF16), 6 steps of 8 micro-batches with dropout on and an
# evaluation at steps 3 and 6: metrics.jsonl (every field but timings and
# the cost model's predictions) and the checkpoint's params, adam_m and
# adam_v blobs are byte-identical on 1, 2, 3 (8 micro-batches dealt 3, 3, 2)
# and 4 ranks, across ring / hierarchical / torus2d, the three placements,
# two bucket sizes, overlap on and off, 1 and 2 threads per rank.
# Resume: 3 steps on 4 ranks, then --resume auto on 3 ranks to 6 = 6 steps
# on 1 rank, byte for byte; and docs/distributed.md's replay of steps 4-6
# on one rank from the 4-rank checkpoint.
# A NaN planted in step 2 is skipped alike on 1 and 3 ranks.
# Not vacuous: the same 1-rank / 4-rank pair with dist.exact = false must
# differ (the fp32 sums' order follows the allocation). Without exact sums
# 3 ranks run 8 micro-batches too (to rounding); 3 ranks for 2 micro-batches
# and a bf16 wire with exact sums are refused in one line naming the keys.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-exact-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
vocab_size=$(bpe_shards "$data/corpus.txt" "$work")
common=(--set train.steps=6 --set train.global_batch=8 --set train.micro_batch=1
  --set train.ckpt_every=3 --set train.eval_every=3 --set train.eval_batches=5
  --set dist.calibrate=false --set dist.exact=true)
bert() { # bert RUN_DIR
  echo $(tiny_args "$data" "$1") --set data.heldout_manifest="$data/shards/heldout.manifest"
}
gpt() { # gpt RUN_DIR
  echo "$SRC/conf/gpt2-mini.cfg" --set model.vocab_size=$vocab_size \
    --set model.layers=2 --set model.hidden=32 --set model.heads=2 --set model.max_positions=32 \
    --set data.seq=32 --set data.train_manifest="$work/shards/train.manifest" \
    --set data.heldout_manifest="$work/shards/heldout.manifest" --set train.run_dir="$1" \
    --set train.peak_gflops=10 --set optim.lr=3e-3 --set optim.warmup_steps=3 --set train.threads=1 --quiet
}
run() { # run MODEL NAME RANKS [--set ...]
  local model=$1 name=$2 n=$3; shift 3
  mpi "$n" "$BIN/cloze-train" $($model "$work/$name") "${common[@]}" "$@" 2> "$work/$name.log" ||
    { cat "$work/$name.log"; exit 1; }
}
# metrics.jsonl less timings and predictions, one line per record
numbers() {
  $PY -c '
import json, re, sys
skip = re.compile(r"seconds|per_s|mfu|rss|pred_")
for line in open(sys.argv[1]):
    r = json.loads(line)
    r = {k: v for k, v in r.items() if not skip.search(k)}
    if r and "resumed" not in r:  # memory records and the resume record aside
        print(json.dumps(r, sort_keys=True))
' "$1"
}
blobs() { # blobs RUN: the last checkpoint's params, adam_m, adam_v
  local b
  for b in params adam_m adam_v; do
    "$BIN/cloze-ckpt" dump-blob "$1/ckpt-00000006.lz4" $b | sha256sum
  done
}
same() { # same A B
  if ! diff <(numbers "$work/$1/metrics.jsonl") <(numbers "$work/$2/metrics.jsonl") > "$work/diff"; then
    echo "FAIL: $1 and $2: metrics.jsonl differs:"; head -4 "$work/diff"; exit 1
  fi
  [ "$(blobs "$work/$1")" = "$(blobs "$work/$2")" ] ||
    { echo "FAIL: $1 and $2: the step-6 checkpoint's params/adam_m/adam_v differ"; exit 1; }
  echo "$1 = $2: same metrics, same params, adam_m, adam_v"
}
precisions=(fp32)
grep -q avx512_bf16 /proc/cpuinfo && precisions+=(bf16) ||
  echo "note: no AVX512_BF16 here: bf16 products not checked"
for model in bert gpt; do
  for prec in "${precisions[@]}"; do
    p=(--set model.matmul_precision=$prec)
    k=$model-$prec
    run $model $k-np1 1 "${p[@]}"
    run $model $k-np2 2 "${p[@]}" --set dist.allreduce=ring --set dist.placement=sharded \
      --set dist.overlap=true --set train.threads=2
    run $model $k-np3 3 "${p[@]}" --set dist.allreduce=hierarchical \
      --set dist.placement=coordinator --set dist.overlap=false --set dist.bucket_mb=0.05
    run $model $k-np4 4 "${p[@]}" --set dist.allreduce=torus2d --set dist.placement=replicated \
      --set dist.bucket_mb=0.01
    for n in 2 3 4; do same $k-np1 $k-np$n; done
  done
done
# a 3-rank ring with the sharded placement, and MPI's own int64 sum
run bert ring3 3 --set dist.allreduce=ring --set dist.placement=sharded --set dist.bucket_mb=0.01
run bert mpi2 2 --set dist.allreduce=mpi --set dist.placement=replicated
same bert-fp32-np1 ring3
same bert-fp32-np1 mpi2

# resume on another rank count: 4 ranks to step 3, then 3 ranks to 6 (a
# constant schedule: the first part's train.steps = 3 does not change it)
run bert whole 1 --set optim.schedule=constant
run bert resumed 4 --set optim.schedule=constant --set train.steps=3
run bert resumed 3 --set optim.schedule=constant --resume auto
same whole resumed
# docs/distributed.md's replay: the 4-rank checkpoint of step 3 in a run
# directory of its own, one rank, the run's own config.cfg
mkdir -p "$work/replay" && cp "$work/resumed/ckpt-00000003.lz4" "$work/replay/"
mpi 1 "$BIN/cloze-train" "$work/resumed/config.cfg" --set train.run_dir="$work/replay" \
  --set train.threads=1 --set train.stop_after_steps=3 --resume auto --quiet 2> "$work/replay.log" ||
  { cat "$work/replay.log"; exit 1; }
[ "$(blobs "$work/replay")" = "$(blobs "$work/whole")" ] ||
  { echo "FAIL: the replay on one rank ends with other bytes than the run"; exit 1; }
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/whole/metrics.jsonl" "$work/replay/metrics.jsonl" \
  --exact --fields loss,mlm_loss,nsp_loss,grad_norm --from 4 --to 6
echo "replay of steps 4-6 on one rank: the same bytes"

# a NaN in step 2's gradient (CLOZE_INJECT_NAN_STEPS): skipped alike on 1 and 3 ranks
CLOZE_INJECT_NAN_STEPS=2 run bert nan-np1 1
CLOZE_INJECT_NAN_STEPS=2 run bert nan-np3 3 --set dist.placement=coordinator
same nan-np1 nan-np3
grep -q '"step":2,.*"skipped":1' "$work/nan-np1/metrics.jsonl" ||
  { echo "FAIL: the poisoned step 2 was not skipped"; exit 1; }

# the test is not vacuous: without exact sums 1 and 4 ranks differ
run bert off-np1 1 --set dist.exact=false
run bert off-np4 4 --set dist.exact=false --set dist.allreduce=torus2d
if [ "$(blobs "$work/off-np1")" = "$(blobs "$work/off-np4")" ]; then
  echo "FAIL: dist.exact = false gave the same bits on 1 and 4 ranks: the test cannot tell"; exit 1
fi
echo "dist.exact = false: 1 and 4 ranks differ (as expected)"
# uneven dealing without exact sums: 8 micro-batches on 3 ranks run, to rounding
run bert off-np3 3 --set dist.exact=false
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/off-np1/metrics.jsonl" "$work/off-np3/metrics.jsonl" \
  --rel 1e-5 --fields loss,mlm_loss,nsp_loss,grad_norm
# more ranks than micro-batches: refused once, naming the keys
if mpi 3 "$BIN/cloze-train" $(bert "$work/few") "${common[@]}" --set train.global_batch=2 \
     > "$work/few.log" 2>&1; then
  echo "FAIL: 3 ranks for 2 micro-batches were accepted"; exit 1
fi
grep -q 'train.global_batch / train.micro_batch = 2 / 1 = 2 micro-batches.*3 ranks' "$work/few.log" ||
  { echo "FAIL: the refusal does not name the keys:"; cat "$work/few.log"; exit 1; }
[ "$(grep -c 'micro-batches a step' "$work/few.log")" = 1 ] ||
  { echo "FAIL: the refusal is said more than once:"; cat "$work/few.log"; exit 1; }

# a bf16 wire cannot carry the int64 sums: one line naming both keys
if mpi 2 "$BIN/cloze-train" $(bert "$work/wire") "${common[@]}" --set dist.grad_wire=bf16 \
     > "$work/wire.log" 2>&1; then
  echo "FAIL: dist.grad_wire = bf16 with dist.exact = true was accepted"; exit 1
fi
grep -q 'dist.grad_wire.*dist.exact' "$work/wire.log" ||
  { echo "FAIL: the refusal does not name both keys:"; cat "$work/wire.log"; exit 1; }
[ "$(grep -c 'dist.exact' "$work/wire.log")" = 1 ] ||
  { echo "FAIL: the refusal is said more than once:"; cat "$work/wire.log"; exit 1; }
echo "test_train_exact: ok"
