#!/usr/bin/env bash
# End-to-end training throughput, MFU and peak memory: cloze-train (data
# pipeline, forward, backward, all-reduce, AdamW) against
# bench/torch_train_bench.py (PyTorch, same shapes, same global batch), for
# 1 rank x 2 threads and 2 ranks x 1 thread, alternated per configuration.
#
# usage: bench/e2e_vs_torch.sh BUILD_DIR [CONFIG[:REPS]]...
#   CONFIG: mini (BERT-mini L4 H256 A4, seq 128, batch 32)
#           base128 (BERT-base, seq 128, batch 8)
#           base512 (BERT-base, seq 512, batch 2, 80 prediction slots)
#           gpt (GPT-1 L12 H768 A12, seq 512, batch 2, vocab 30522)
#   default: mini:2 base128:2
# env: PEAK (GFLOP/s the MFU divides by, for the whole node; default:
#      measured in the run: the 2-thread fp32 rate of the BERT-base
#      linear-layer products from bench-gemm_bench --quick, cloze's and
#      OpenBLAS's samples together, best sample per shape, median over
#      shapes; probed at the start and before every cloze run, and the
#      median of those probes is the denominator),
#      WORK (scratch directory), PYTHON (default /usr/bin/python3),
#      LOCK (default /tmp/cloze-cpu.lock: every timed run holds it, so timed
#      runs of several people on one machine never overlap).
#      PRECISIONS (cloze's model.matmul_precision values to run, each
#      beside the same PyTorch fp32 run; default "fp32 bf16" on CPUs with
#      avx512_bf16, else "fp32").
# Prints one RESULT line per run, then a markdown table of medians.
set -euo pipefail
build=$(cd "$1" && pwd); shift
root=$(cd "$(dirname "$0")/.." && pwd)
configs=("$@"); [ ${#configs[@]} -gt 0 ] || configs=(mini:2 base128:2)
PRECISIONS=${PRECISIONS:-$(grep -q avx512_bf16 /proc/cpuinfo && echo "fp32 bf16" || echo fp32)}
PYTHON=${PYTHON:-/usr/bin/python3}
LOCK=${LOCK:-/tmp/cloze-cpu.lock}
work=${WORK:-$(mktemp -d /tmp/cloze-e2e.XXXXXX)}
mkdir -p "$work"
results="$work/results.txt"
: >"$results"

[ -f "$work/data/train.manifest" ] || { mkdir -p "$work/data";
  "$build/bench/bench-make_synthetic_shards" "$work/data" --tokens 3000000; }

shape() { # sets conf arch L H A T B P csteps tsteps
  case $1 in
    mini) conf=bert-mini; arch=bert; L=4; H=256; A=4; T=128; B=32; P=20; csteps=10; tsteps=8 ;;
    base128) conf=bert-base; arch=bert; L=12; H=768; A=12; T=128; B=8; P=20; csteps=6; tsteps=4 ;;
    base512) conf=bert-base; arch=bert; L=12; H=768; A=12; T=512; B=2; P=80; csteps=5; tsteps=3 ;;
    gpt) conf=gpt1; arch=gpt; L=12; H=768; A=12; T=512; B=2; P=0; csteps=5; tsteps=3 ;;
    *) echo "e2e_vs_torch: unknown config $1" >&2; exit 2 ;;
  esac
}

run_cloze() { # cfg ranks threads rep precision
  local dir="$work/run-$1-$2x$3-$4-$5"
  rm -rf "$dir"
  [ -n "$FIXED_PEAK" ] || echo "peak probe: $(probe_peak) GFLOP/s"
  flock "$LOCK" "$root/launch/cloze-mpirun" -n "$2" -t "$3" "$build/cloze-train" \
    "$root/conf/$conf.cfg" --quiet \
    --set data.train_manifest="$work/data/train.manifest" --set train.run_dir="$dir" \
    --set model.vocab_size=30522 --set model.matmul_precision="$5" \
    --set data.seq=$T --set data.max_pred=$P \
    --set train.steps=$csteps --set train.global_batch=$B --set train.micro_batch=$((B / $2)) \
    --set train.peak_gflops="$(echo "$PEAK / $2" | bc -l)" --set train.ckpt_every=0 --set data.phase2_fraction=0 --set optim.warmup_steps=1 \
    >"$dir.log" 2>&1 || { echo "cloze run failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; return 1; }
  # median over steps 3.. (the first two warm up, as in the torch bench)
  "$PYTHON" - "$dir/metrics.jsonl" "$1" "$2" "$3" "$4" "$5" >>"$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "tokens_per_s" in r and r["step"] >= 3]
mem = [r for r in rows if "peak_rss_train_mib_max" in r][0]
med = lambda k: statistics.median(r[k] for r in steps)
print("RESULT cloze-%s %s %sx%s rep%s tokens_per_s %.1f mfu %.4f rss_mib %.0f step_s %.4f "
      "optim_s %.4f comm_wait_s %.4f" % (sys.argv[6], *sys.argv[2:6], med("tokens_per_s"), med("mfu"),
      mem["peak_rss_train_mib_max"], med("step_seconds"), med("optim_seconds"),
      med("comm_wait_seconds")))
EOF
  rm -rf "$dir" # checkpoints: GBs for BERT-base
  tail -1 "$results"
}

run_torch() { # cfg ranks threads rep
  local args=(--arch $arch --layers $L --hidden $H --heads $A --seq $T --batch $B
              --vocab 30522 --steps $tsteps --threads $3)
  [ "$P" -gt 0 ] && args+=(--max-pred $P)
  # ranks as separate processes bound to one core each, like cloze-mpirun
  # (torch.distributed.run of torch 1.13 fails under Python 3.11)
  local line
  line=$(flock "$LOCK" bash -c '
    n=$1; shift
    for r in $(seq 0 $((n - 1))); do
      bind=(); [ "$n" -gt 1 ] && bind=(taskset -c $r)
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$((2 / n)) \
        RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 "${bind[@]}" "$@" &
    done
    wait' _ "$2" "$PYTHON" "$root/bench/torch_train_bench.py" "${args[@]}" 2>&1 | grep '^torch ' || true)
  echo "$line" >&2
  local tps rss
  tps=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) tokens\/s.*/\1/p')
  rss=$(echo "$line" | sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p')
  tps=${tps:-nan}; rss=${rss:-nan}
  echo "RESULT torch $1 $2x$3 rep$4 tokens_per_s $tps mfu nan rss_mib $rss" | tee -a "$results"
}

# The 2-thread sgemm rate: per BERT-base linear shape the best sample (other
# jobs only ever lower a sample), then the median over the shapes. This
# guest's rate moves with its neighbours (one start-of-run probe read 166
# and another 172 GFLOP/s where most read 205-210), so without PEAK= it is
# probed again before every cloze run and MFU is taken over the median of
# all probes of the run (printed with their range).
probe_peak() {
  flock "$LOCK" "$build/bench/bench-gemm_bench" --choice auto --threads 2 --quick \
    --rounds 2 2>/dev/null | awk -F'\t' '$1 == "sample" && $3 !~ /^attn/ {
      if ($5 > best[$3]) best[$3] = $5 } END {for (k in best) print best[k]}' |
    sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}' |
    tee -a "$work/peaks.txt"
}
: >"$work/peaks.txt"
FIXED_PEAK=${PEAK:-}
if [ -z "$FIXED_PEAK" ]; then
  PEAK=$(probe_peak)
  echo "peak: $PEAK GFLOP/s at the start (2-thread sgemm, BERT-base linear shapes; probed again before each cloze run)"
else
  echo "peak: $PEAK GFLOP/s (PEAK= given)"
fi
echo "machine: $(lscpu | grep 'Model name' | sed 's/  */ /g'); $(date -u '+%F %H:%M UTC'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for item in "${configs[@]}"; do
  cfg=${item%%:*}; reps=${item#*:}; [ "$reps" != "$item" ] || reps=1
  shape "$cfg"
  for rep in $(seq 1 "$reps"); do
    for layout in "1 2" "2 1"; do
      for prec in $PRECISIONS; do run_cloze "$cfg" $layout "$rep" "$prec"; done
      run_torch "$cfg" $layout "$rep"
    done
  done
done
echo "end: $(date -u '+%H:%M UTC'); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# Table: medians over repetitions; torch MFU uses cloze's FLOPs per token
# (same model, cz_model_forward_flops x 3), recovered from cloze's MFU.
final_peak=$PEAK
if [ -z "$FIXED_PEAK" ]; then
  final_peak=$(sort -n "$work/peaks.txt" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  echo "peak probes: $(wc -l <"$work/peaks.txt"), $(sort -n "$work/peaks.txt" | head -1)-$(sort -n "$work/peaks.txt" | tail -1) GFLOP/s, median $final_peak (the MFU denominator below)"
fi
"$PYTHON" - "$results" "$PEAK" "$final_peak" <<'EOF'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(zip(f[5::2], f[6::2]))
    runs[(f[2], f[3], f[1])].append({k: float(v) for k, v in kv.items()})
given, peak = float(sys.argv[2]), float(sys.argv[3])  # cloze's mfu is over `given`
names = {"mini": "BERT-mini T128 B32", "base128": "BERT-base T128 B8",
         "base512": "BERT-base T512 B2", "gpt": "GPT-1 T512 B2"}
print(f"| model | ranks x threads | cloze precision | cloze tokens/s | torch tokens/s | cloze/torch | cloze MFU | "
      f"torch MFU | cloze peak RSS/rank | torch peak RSS/rank | cloze optimizer s/step | "
      f"cloze all-reduce wait s/step | reps |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (cfg, layout, prog) in [k for k in runs if k[2].startswith("cloze")]:
    c, t = runs[(cfg, layout, prog)], runs.get((cfg, layout, "torch"), [])
    med = lambda rs, k: statistics.median(r[k] for r in rs) if rs else float("nan")
    ctps, ttps = med(c, "tokens_per_s"), med(t, "tokens_per_s")
    fpt = statistics.median(r["mfu"] * given * 1e9 / r["tokens_per_s"] for r in c)
    print(f"| {names.get(cfg, cfg)} | {layout.replace('x', ' x ')} | {prog[6:]} | {ctps:.0f} | {ttps:.0f} | "
          f"{ctps / ttps:.2f} | {100 * ctps * fpt / (peak * 1e9):.1f}% | {100 * ttps * fpt / (peak * 1e9):.1f}% | "
          f"{med(c, 'rss_mib'):.0f} MiB | {med(t, 'rss_mib'):.0f} MiB | {med(c, 'optim_s'):.3f} | "
          f"{med(c, 'comm_wait_s'):.3f} | {len(c)} |")
print(f"\nMFU = tokens/s x 3 x forward FLOPs per token (cz_model_forward_flops) / {peak:g} GFLOP/s "
      "(the fp32 sgemm rate, also for bf16 rows).")
EOF
