#!/usr/bin/env bash
# Same bits from two builds: for a change that must not move a bit (a file
# split, a refactoring), run the same small jobs with the programs of an old
# and a new build and require byte-identical outputs.
#
#   same_bits.sh OLD_BUILD NEW_BUILD [WORK]
#
# Jobs, each on 2 ranks, in fp32 and in bf16 (model.matmul_precision; where
# the CPU has AVX512_BF16): pre-training 20 steps of BERT, GPT-1 and GPT-2's
# layout (pre_ln), the last with recomputation too; fine-tuning from the
# pre-trained checkpoints (BERT classify, span, tag, choice; GPT classify
# with its auxiliary LM loss, similar, choice; GPT-2 classify), a predict
# from a fine-tuned checkpoint, and BERT's features (cloze-finetune
# features: BERT models only).
# Compared: metrics.jsonl (every field but the timings and memory),
# results.jsonl (but seconds; paths into the two trees as one), predictions, the checkpoints' params blobs
# (cloze-ckpt dump-blob) and the features' files. Data: the training tests'
# corpus (python3.11-doc's tutorial) prepared with NEW_BUILD's cloze-prep.
# Not a ctest test (it needs a second build); its runs are logged in
# docs/reliability-log.md.
set -euo pipefail
OLD=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
export CLOZE_BUILD_DIR=$NEW CLOZE_SOURCE_DIR=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/train_common.sh"
work=${3:-$(mktemp -d /tmp/cloze-same-bits-XXXXXX)}
mkdir -p "$work"
data=$work/data
prepare_corpus "$data"
bpe=$work/bpe
mkdir -p "$bpe"
gv=$(bpe_shards "$data/corpus.txt" "$bpe")
$PY "$SRC/tests/finetune/make_tasks.py" "$data/corpus.txt" "$work/tasks" >/dev/null
awk 'NF && n++ < 24' "$data/corpus.txt" >"$work/lines.txt"
precisions=fp32
grep -q avx512_bf16 /proc/cpuinfo && precisions="fp32 bf16"

common=(--set train.steps=20 --set train.global_batch=4 --set train.micro_batch=2
  --set train.threads=1 --set train.ckpt_every=20 --set train.eval_every=0 --set train.peak_gflops=10
  --set optim.warmup_steps=3 --set train.log_every=1 --quiet)
gpt_args() { # CFG RUN_DIR
  echo "$SRC/conf/$1" --set model.vocab_size="$gv" --set model.layers=2 --set model.hidden=32 \
    --set model.heads=2 --set model.max_positions=64 --set data.seq=32 \
    --set data.train_manifest="$bpe/shards/train.manifest" --set train.run_dir="$2"
}
last_ckpt() { ls "$1"/ckpt-*.lz4 | tail -1; }

tsv=(--task tsv --text-a sentence --label label --train "$work/tasks/cls_train.tsv"
  --dev "$work/tasks/cls_dev.tsv" --max-seq 32 --batch 8 --epochs 1 --lr 1e-3 --seed 3
  --train-limit 64 --dev-limit 32)
squad=(--task squad --train "$work/tasks/squad_train.json" --dev "$work/tasks/squad_dev.json"
  --max-seq 64 --doc-stride 16 --max-query 16 --batch 8 --epochs 1 --lr 1e-3 --train-limit 32
  --dev-limit 16)
conll=(--task conll --train "$work/tasks/tag_train.conll" --dev "$work/tasks/tag_dev.conll"
  --max-seq 48 --batch 8 --epochs 1 --lr 3e-3 --train-limit 64 --dev-limit 32)
choice=(--task choice --train "$work/tasks/choice_train.jsonl" --dev "$work/tasks/choice_dev.jsonl"
  --max-seq 48 --batch 8 --epochs 1 --lr 1e-3 --seed 6 --train-limit 32 --dev-limit 16)
pair=(--task tsv --text-a sentence1 --text-b sentence2 --label label --similarity
  --train "$work/tasks/pair_train.tsv" --dev "$work/tasks/pair_dev.tsv" --max-seq 64 --batch 8
  --epochs 1 --lr 1e-3 --seed 5 --train-limit 32 --dev-limit 16)

jobs_of() { # BUILD OUT: every job with BUILD's programs into OUT
  local bin=$1 out=$2 p
  mkdir -p "$out"
  for p in $precisions; do
    local o=$out/$p prec=(--set model.matmul_precision="$p")
    mkdir -p "$o"
    mpi 2 "$bin/cloze-train" $(tiny_args "$data" "$o/bert") "${common[@]}" "${prec[@]}"
    mpi 2 "$bin/cloze-train" $(gpt_args gpt-mini.cfg "$o/gpt") "${common[@]}" "${prec[@]}"
    mpi 2 "$bin/cloze-train" $(gpt_args gpt2-mini.cfg "$o/gpt2") "${common[@]}" "${prec[@]}"
    mpi 2 "$bin/cloze-train" $(gpt_args gpt2-mini.cfg "$o/gpt2rc") "${common[@]}" "${prec[@]}" \
      --set model.recompute=layers
    local bert gpt gpt2 t
    bert=$(last_ckpt "$o/bert") gpt=$(last_ckpt "$o/gpt") gpt2=$(last_ckpt "$o/gpt2")
    for t in tsv squad conll choice; do
      declare -n a=$t
      mpi 2 "$bin/cloze-finetune" run --init "$bert" --out "$o/bert-$t" --threads 1 --quiet "${a[@]}"
      unset -n a
    done
    for t in tsv pair choice; do
      declare -n a=$t
      mpi 2 "$bin/cloze-finetune" run --init "$gpt" --out "$o/gpt-$t" --threads 1 --quiet "${a[@]}"
      unset -n a
    done
    mpi 2 "$bin/cloze-finetune" run --init "$gpt2" --out "$o/gpt2-tsv" --threads 1 --quiet "${tsv[@]}"
    mpi 2 "$bin/cloze-finetune" predict --init "$(last_ckpt "$o/bert-tsv")" --task tsv \
      --text-a sentence --label label --input "$work/tasks/cls_dev.tsv" --out "$o/bert-predict" \
      --threads 1 --quiet
    mpi 2 "$bin/cloze-finetune" features --init "$bert" --input "$work/lines.txt" --max-seq 32 --layers -1,-2,-3 \
      --out "$o/bert-features.safetensors" --threads 1 --quiet
  done
}
jobs_of "$OLD" "$work/old" >"$work/old.log" 2>&1 || { tail -20 "$work/old.log"; exit 1; }
jobs_of "$NEW" "$work/new" >"$work/new.log" 2>&1 || { tail -20 "$work/new.log"; exit 1; }

# the comparison: every file both trees hold, timings left out
$PY - "$work/old" "$work/new" "$NEW/cloze-ckpt" <<'PY'
import json, os, re, subprocess, sys
old, new, ckpt = sys.argv[1:4]
TIMING = re.compile(r"time|seconds|_s$|_ms$|per_s|mfu|rss|gflops|eta|wall|date|host", re.I)
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if not TIMING.search(k)}
    if isinstance(v, list):
        return [clean(x) for x in v]
    if isinstance(v, str):  # paths into the tree, as the same path
        return v.replace(old, "<run>").replace(new, "<run>")
    return v
def content(path):
    if path.endswith(".lz4"):
        return subprocess.run([ckpt, "dump-blob", path, "params"], check=True,
                              capture_output=True).stdout
    if path.endswith(".jsonl"):
        return [clean(json.loads(l)) for l in open(path)]
    if path.endswith(".json"):
        return clean(json.load(open(path)))
    if path.endswith((".log", ".cfg", "network.txt", "run.lock")):
        return None  # times, host and pid; config.cfg is the input
    return open(path, "rb").read()
compared, differ = 0, []
# TensorBoard's event files: named by the time and host they were opened,
# holding wall times; their scalars are metrics.jsonl's, which is compared
def event_file(f):
    return f.startswith("events.out.tfevents.")
for root, _, files in os.walk(old):
    for f in sorted(files):
        if event_file(f):
            continue
        a = os.path.join(root, f)
        rel = os.path.relpath(a, old)
        b = os.path.join(new, rel)
        if not os.path.exists(b):
            differ.append(rel + " (absent in new)")
            continue
        ca = content(a)
        if ca is None:
            continue
        compared += 1
        if ca != content(b):
            differ.append(rel)
for root, _, files in os.walk(new):
    for f in files:
        if event_file(f):
            continue
        rel = os.path.relpath(os.path.join(root, f), new)
        if not os.path.exists(os.path.join(old, rel)):
            differ.append(rel + " (absent in old)")
if differ:
    print("DIFFER:", *differ, sep="\n  ")
    sys.exit(1)
print(f"same bits: {compared} files identical (checkpoints' params blobs, metrics, results, "
      "predictions, features)")
PY
