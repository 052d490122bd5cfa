#!/usr/bin/env bash
# Fine-tuning wall time with batches padded to --max-seq (--pad max, how
# cloze padded before) against batches padded to their longest sequence
# (--pad longest, the default), alternated, on WNUT-17 tagging and SQuAD
# v1.1 from ../shared/data with a model you give (e.g. the imported
# all-MiniLM-L6-v2: docs/finetune.md, "Moving models").
#
#   bench/finetune_pad.sh BUILD_DIR MODEL.lz4 [REPS] [THREADS]
#
# Each run is `cloze-finetune run` (1 rank, THREADS threads, default 2) on a
# fixed subset: WNUT-17 the first 320 training sentences, 1 epoch (10 steps
# of 32), dev = the 1,009 emerging.dev sentences, --max-seq 64; SQuAD the
# first 160 questions of articles 00-17 (train) and the first 100 of 18-23
# (dev), --max-seq 128 --doc-stride 64 --max-query 32, 1 epoch. Prints per
# task the median wall seconds of each padding, their ratio, and the dev
# score and last training loss of each (equal up to float rounding), with
# the load average.
set -euo pipefail
bin=${1:?usage: finetune_pad.sh BUILD_DIR MODEL.lz4 [REPS] [THREADS]}
model=${2:?usage: finetune_pad.sh BUILD_DIR MODEL.lz4 [REPS] [THREADS]}
reps=${3:-2}
threads=${4:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
data=$here/../shared/data/tasks
[ -d "$data/wnut17" ] || { echo "finetune_pad: $data absent (../shared/data)" >&2; exit 77; }
work=$(mktemp -d /tmp/cloze-padbench-XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 - "$data/squad/dev-v1.1-articles-00-23.json" "$work" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
for name, arts in (("squad-train.json", d[:18]), ("squad-dev.json", d[18:24])):
    json.dump({"version": "1.1", "data": arts}, open(f"{sys.argv[2]}/{name}", "w"))
PY
wnut=(--task wnut17 --train "$data/wnut17/wnut17train.conll" --dev "$data/wnut17/emerging.dev.conll"
  --train-limit 320 --max-seq 64 --lr 1e-4 --batch 32 --epochs 1)
squad=(--task squad --train "$work/squad-train.json" --dev "$work/squad-dev.json" --train-limit 160
  --dev-limit 100 --max-seq 128 --doc-stride 64 --max-query 32 --lr 5e-5 --batch 32 --epochs 1)
one() { # task pad rep -> "seconds score"
  local task=$1 pad=$2 rep=$3 out=$work/$1-$2-$3
  local -n args=$task
  local t0 t1
  t0=$(date +%s.%N)
  "$bin/cloze-finetune" run --init "$model" "${args[@]}" --pad "$pad" --threads "$threads" \
    --quiet --out "$out" >/dev/null 2>"$out.log" || { cat "$out.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') $(python3 -c '
import json, sys
score = json.loads(open(sys.argv[1]).readlines()[-1])["score"]
loss = json.loads(open(sys.argv[2]).readlines()[-1])["loss"]
print(f"{score:.6f} {loss:.6f}")' "$out/results.jsonl" "$out/metrics.jsonl")"
}
echo "# cloze-finetune --pad max vs longest, $reps runs each alternated, $threads thread(s)"
echo "# $(lscpu | sed -n 's/^Model name: *//p'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| task | --pad max (s, median) | --pad longest (s, median) | max / longest | dev score, last loss: max | longest |"
echo "|---|---|---|---|---|---|"
for task in wnut squad; do
  : >"$work/$task.max" && : >"$work/$task.longest"
  for r in $(seq "$reps"); do
    for pad in max longest; do one "$task" "$pad" "$r" >>"$work/$task.$pad"; done
  done
  python3 - "$task" "$work/$task.max" "$work/$task.longest" <<'PY'
import statistics, sys
task, a, b = sys.argv[1], *([l.split() for l in open(f)] for f in sys.argv[2:])
ma, mb = (statistics.median(float(x[0]) for x in r) for r in (a, b))
print(f"| {task} | {ma:.1f} | {mb:.1f} | {ma / mb:.2f} | {a[0][1]}, {a[0][2]} | {b[0][1]}, {b[0][2]} |")
PY
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
