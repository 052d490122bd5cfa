#!/usr/bin/env bash
# Where an fp32 training step spends its time, by phase, per BLIS kernel:
#
# 1. forward + backward of one micro-batch (bench-model_step_bench's
#    profile): GEMM, attention (scores, softmax, the per-head products),
#    elementwise (layer norm, GELU, dropout, residuals), embeddings, loss,
#    other; THREADS threads on one process.
# 2. the whole optimizer step of cloze-train (synthetic shards, through
#    launch/cloze-mpirun) at each layout (1 rank x 2 threads, 2 ranks x 1
#    thread): data + forward, backward, the gradient all-reduce's wait that
#    backward did not hide, the optimizer (norm, clipping, AdamW), and the
#    rest (step statistics), medians over steps 3.. of metrics.jsonl.
#
# The BLIS kernel is forced per process with BLIS_ARCH_TYPE (BLIS fixes it
# once per process); the tables name the configuration that ran, as cloze
# logs it. Runs alternate per repetition, each repetition under the
# machine-wide lock.
#
# usage: bench/step_profile.sh BUILD_DIR [mini|base|tiny ...]   (default mini)
#   mini = BERT-mini L4 H256 A4, seq 128, batch 32; base = BERT-base L12
#   H768 A12, seq 128, batch 8 (bench/e2e_vs_torch.sh's shapes); tiny = L2
#   H128 A2, seq 64, batch 8 (seconds: checks that the script runs).
#   env GEMM_KERNELS (default "cpuid": cloze's CPUID choice; BLIS 0.9.0
#   configuration names force one: skx, haswell, zen3, zen2, zen; those this
#   CPU cannot run are left out), THREADS (default 2), LAYOUTS (default
#   "1x2 2x1"; "none" skips part 2), STEPS (model_step_bench's timed steps,
#   default mini 5, base 3), TRAIN_STEPS (cloze-train steps, default 8),
#   REPS (default 1), WORK (scratch), LOCK (default /tmp/cloze-cpu.lock).
set -euo pipefail
build=$(cd "${1:?usage: bench/step_profile.sh BUILD_DIR [mini|base|tiny ...]}" && pwd); shift
root=$(cd "$(dirname "$0")/.." && pwd)
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(mini)
THREADS=${THREADS:-2}
LAYOUTS=${LAYOUTS:-1x2 2x1}; [ "$LAYOUTS" != none ] || LAYOUTS=
LOCK=${LOCK:-/tmp/cloze-cpu.lock}
source "$(dirname "$0")/blis_arch.sh"
blis_kernels ${GEMM_KERNELS:-cpuid}
work=${WORK:-$(mktemp -d /tmp/cloze-step-profile.XXXXXX)}
mkdir -p "$work"
[ -n "${WORK:-}" ] || trap 'rm -rf "$work"' EXIT
out=$work/results.txt
: >"$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -n "$LAYOUTS" ] && [ ! -f "$work/data/train.manifest" ]; then
  mkdir -p "$work/data"
  "$build/bench/bench-make_synthetic_shards" "$work/data" --tokens 1000000 >/dev/null
fi
shape() { # sets L H A T B conf steps
  case $1 in
    mini) L=4; H=256; A=4; T=128; B=32; conf=bert-mini; steps=5 ;;
    base) L=12; H=768; A=12; T=128; B=8; conf=bert-base; steps=3 ;;
    tiny) L=2; H=128; A=2; T=64; B=8; conf=bert-mini; steps=3 ;;
    *) echo "step_profile: unknown model $1 (mini, base, tiny)" >&2; exit 2 ;;
  esac
  steps=${STEPS:-$steps}
}
forced() { # the environment that forces kernel $1
  local e=(env -u BLIS_ARCH_TYPE)
  [ "$1" = cpuid ] || e+=(BLIS_ARCH_TYPE="$(blis_arch_number "$1")")
  echo "${e[@]}"
}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'); $(date -u '+%F %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
exec 9>>"$LOCK"
for model in "${models[@]}"; do
  shape "$model"
  for rep in $(seq "${REPS:-1}"); do
    flock 9
    for k in "${kernels[@]}"; do
      read -r -a envs <<<"$(forced "$k")"
      line=$("${envs[@]}" "$build/bench/bench-model_step_bench" --threads "$THREADS" \
        --layers $L --hidden $H --heads $A --seq $T --batch $B --steps "$steps" 2>/dev/null 9>&- |
        tr '\n' ' ')
      ran=$(echo "$line" | sed -n "s/.*gemm 'blis \([a-z0-9]*\).*/\1/p")
      echo "FB $model ${ran:-?} $line" >>"$out"
      echo "$model $k (ran ${ran:-?}): $(echo "$line" | grep -o 'step median [0-9.]* s')" >&2
      for layout in $LAYOUTS; do
        n=${layout%x*} t=${layout#*x} dir=$work/run-$model-$k-$layout-$rep
        rm -rf "$dir"
        "${envs[@]}" "$root/launch/cloze-mpirun" -n "$n" -t "$t" "$build/cloze-train" \
          "$root/conf/$conf.cfg" --quiet --set model.layers=$L --set model.hidden=$H \
          --set model.heads=$A --set model.intermediate=$((4 * H)) --set model.vocab_size=30522 \
          --set data.train_manifest="$work/data/train.manifest" --set train.run_dir="$dir" \
          --set data.seq=$T --set data.max_pred=20 --set data.phase2_fraction=0 \
          --set train.steps="${TRAIN_STEPS:-8}" --set train.global_batch=$B \
          --set train.micro_batch=$((B / n)) --set train.ckpt_every=0 --set train.eval_every=0 \
          --set train.peak_gflops=100 --set optim.warmup_steps=1 >"$dir.log" 2>&1 9>&- ||
          { echo "cloze-train failed ($model $k $layout), see $dir.log" >&2; tail -5 "$dir.log" >&2; exit 1; }
        ran=$(sed -n 's/.*gemm: blis \([a-z0-9]*\).*/\1/p' "$dir.log" | head -1)
        echo "TRAIN $model ${ran:-?} $layout $dir/metrics.jsonl" >>"$out"
      done
    done
    flock -u 9
  done
done
echo "end: $(date -u '+%H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$THREADS" <<'PY'
import collections, json, re, statistics, sys
fb, train = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split(maxsplit=3)
    if f[0] == "FB":
        step = re.search(r"step median ([0-9.]+) s", f[3])
        parts = dict((k, float(v)) for k, v in re.findall(
            r"(gemm|attention|elementwise|embeddings|loss|other|total) ([0-9.]+) s", f[3]))
        if step and parts:
            fb[(f[1], f[2])].append((float(step.group(1)), parts))
    else:
        layout, path = f[3].split()
        rows = [json.loads(l) for l in open(path)]
        train[(f[1], f[2], layout)].append([r for r in rows if "step_seconds" in r and r["step"] >= 3])
med = statistics.median
print(f"Forward + backward of one micro-batch, {sys.argv[2]} thread(s) (bench-model_step_bench), "
      "seconds per step (share of the profiled total); median over repetitions")
print()
names = ["gemm", "attention", "elementwise", "embeddings", "loss", "other"]
print("| model | BLIS kernel | step | " + " | ".join(names) + " |")
print("|---|---|---|" + "---|" * len(names))
for (model, kernel), runs in fb.items():
    total = med(p["total"] for _, p in runs)
    cells = [f"{med(p[n] for _, p in runs):.4f} ({100 * med(p[n] for _, p in runs) / total:.1f}%)"
             for n in names]
    print(f"| {model} | {kernel} | {med(s for s, _ in runs):.4f} s | " + " | ".join(cells) + " |")
if not train:
    sys.exit(0)
print()
print("Whole optimizer step of cloze-train (launch/cloze-mpirun, synthetic shards), median over "
      "steps 3.. of every repetition; data + forward = compute - backward; rest = step - compute "
      "- comm wait - optimizer")
print()
print("| model | BLIS kernel | layout | step | tokens/s | data + forward | backward | comm wait "
      "| optimizer | rest |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (model, kernel, layout), reps in train.items():
    rows = [r for rep in reps for r in rep]
    m = lambda f: med(f(r) for r in rows)
    step = m(lambda r: r["step_seconds"])
    parts = [m(lambda r: r["compute_seconds"] - r["backward_seconds"]),
             m(lambda r: r["backward_seconds"]), m(lambda r: r["comm_wait_seconds"]),
             m(lambda r: r["optim_seconds"]),
             m(lambda r: r["step_seconds"] - r["compute_seconds"] - r["comm_wait_seconds"]
               - r["optim_seconds"])]
    cells = [f"{v:.4f} ({100 * v / step:.1f}%)" for v in parts]
    print(f"| {model} | {kernel} | {layout.replace('x', ' x ')} | {step:.4f} s | "
          f"{m(lambda r: r['tokens_per_s']):.0f} | " + " | ".join(cells) + " |")
PY
