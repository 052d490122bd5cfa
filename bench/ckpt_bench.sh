#!/usr/bin/env bash
# Checkpoint size and the time a write blocks training, for two builds side
# by side (e.g. before and after the byte-shuffle filter): cloze-train runs
# 1 step of a model on synthetic shards and writes its end-of-run checkpoint
# (params + both Adam moments, 1 rank); printed: the file size, the
# container it decompresses to, how long training was blocked (a build
# that writes in the background logs "training waited"; one that does not
# blocks for the whole write) and how long the write took.
# With STEPS=N CKPT_EVERY=K in the environment it runs N steps with a
# checkpoint every K and also prints the wall time of the whole run (the
# background write competes with the training threads for the cores).
# OLD_ARGS / NEW_ARGS add settings to one side (e.g. the same build twice
# with "--set train.ckpt_writer=inline" and "...=thread"); THREADS sets
# train.threads (default 0: every allowed CPU).
# Rounds alternate the builds. Run under the machine-wide CPU lock (flock /tmp/cloze-cpu.lock).
#   bench/ckpt_bench.sh OLD_BUILD NEW_BUILD [MODEL=bert-mini] [ROUNDS=3]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd)
model=${3:-bert-mini} rounds=${4:-3}
work=$(mktemp -d /tmp/cloze-ckpt-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work/data"
"$new/bench/bench-make_synthetic_shards" "$work/data" --tokens 200000 >/dev/null
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $model; old: ${OLD_ARGS:-}; new: ${NEW_ARGS:-}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
steps=${STEPS:-1} every=${CKPT_EVERY:-0}
echo "| build | round | file bytes | container bytes | ratio | training blocked s | write s | run wall s |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for b in old new; do
    dir=${!b} run=$work/$b-$round
    side_args=OLD_ARGS; [ $b = old ] || side_args=NEW_ARGS
    t0=$(date +%s.%N)
    mpirun --bind-to none -np 1 "$dir/cloze-train" "$here/conf/$model.cfg" \
      --set data.train_manifest="$work/data/train.manifest" --set train.run_dir="$run" \
      --set train.steps="$steps" --set train.ckpt_every="$every" --set train.keep_last=1 \
      --set train.global_batch=1 --set train.micro_batch=1 \
      --set train.threads="${THREADS:-0}" --set train.eval_every=0 --set train.peak_gflops=100 \
      --set data.seq=128 --set data.max_pred=20 --set data.phase2_fraction=0 \
      --set optim.warmup_steps=0 --set optim.warmup_fraction=0 ${!side_args:-} 2> "$run.log" ||
      { cat "$run.log" >&2; exit 1; }
    wall=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.2f}')")
    f=$(ls "$run"/ckpt-*.lz4 | tail -n1)
    size=$(stat -c %s "$f")
    plain=$(lz4 -dc "$f" | wc -c)
    # the last checkpoint's figures
    secs=$(sed -n 's/.*checkpoint .* written in \([0-9.]*\)s.*/\1/p' "$run.log" | tail -n1)
    blocked=$(sed -n 's/.*checkpoint .*: training waited \([0-9.]*\)s.*/\1/p' "$run.log" | tail -n1)
    echo "| $b | $round | $size | $plain | $(python3 -c "print(f'{$size/$plain:.4f}')") | ${blocked:-$secs} | $secs | $wall |"
    rm -rf "$run"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
