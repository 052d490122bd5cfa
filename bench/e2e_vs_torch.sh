#!/usr/bin/env bash
# End-to-end training throughput, MFU and peak memory: cloze-train (data
# pipeline, forward, backward, all-reduce, AdamW) against
# bench/torch_train_bench.py (PyTorch, same shapes, same global batch), for
# 1 rank x 2 threads and 2 ranks x 1 thread, alternated per configuration.
# Three PyTorch peers in the same run (TORCH_PEERS picks among them):
#   pypi-eager    the latest PyTorch 2 from PyPI, eager, q/k/v in one product
#                 and F.scaled_dot_product_attention
#   pypi-compile  the same under torch.compile
#   debian        Debian's python3-torch 1.13 (/usr/bin/python3),
#                 nn.MultiheadAttention (1.13 has no SDPA)
# PyPI's torch lives in a virtual environment this script creates under the
# build directory (TORCH_VENV, default BUILD_DIR/torch-venv; `pip install
# torch numpy`, several GB with the CUDA wheels it pulls): a benchmark peer,
# never a dependency of cloze. Without network or disk for it, the PyPI
# peers are left out with a message.
#
# usage: bench/e2e_vs_torch.sh BUILD_DIR [CONFIG[:REPS]]...
#   CONFIG: mini (BERT-mini L4 H256 A4, seq 128, batch 32)
#           base128 (BERT-base, seq 128, batch 8)
#           base512 (BERT-base, seq 512, batch 2, 80 prediction slots)
#           large512 (BERT-large L24 H1024 A16, seq 512, batch 2, 80
#                prediction slots: BERT's phase 2)
#           gpt (GPT-1 L12 H768 A12, seq 512, batch 2, vocab 30522)
#           gpt2 (GPT-2 small's layout, conf/gpt2-124m.cfg: pre-LN, L12 H768
#                A12, seq 1024, batch 2, vocab 30522 (cloze pads it to 30528
#                rows, model.vocab_pad_to = 64; PyTorch has 30522))
#   default: mini:2 base128:2
# env: PEAK (GFLOP/s the MFU divides by, for the whole node; default:
#      measured in the run: the 2-thread fp32 rate of the BERT-base
#      linear-layer products from bench-gemm_bench --quick, cloze's and
#      OpenBLAS's samples together, best sample per shape, median over
#      shapes; probed at the start and before every cloze run, and the
#      median of those probes is the denominator),
#      WORK (scratch directory), PYTHON (Debian's, default /usr/bin/python3),
#      VENV_PYTHON (the interpreter that makes the venv, default python3),
#      TORCH_PEERS (default "pypi-eager pypi-compile debian"),
#      LOCK (default /tmp/cloze-cpu.lock: held for each group of alternated
#      runs, every program once at one layout, and for the first probe, so
#      timed runs of several people on one machine never overlap and the
#      runs compared are timed back to back).
#      PRECISIONS (cloze's model.matmul_precision values to run; default
#      "fp32 bf16" on CPUs with avx512_bf16, else "fp32"),
#      TORCH_PRECISIONS (the PyTorch peers' precisions, default PRECISIONS:
#      fp32, and bf16 = torch.autocast("cpu", dtype=torch.bfloat16); each
#      cloze precision is compared with the peers of the same precision,
#      and each side's best over precisions with the other's),
#      KERNELS (CLOZE_KERNELS values for cloze's runs, default "auto"; e.g.
#      "auto avx2" adds runs of the AVX2 path on an AVX-512 machine, shown
#      as cloze-fp32-avx2: figures of that path on that CPU, not of an
#      AVX2-only CPU),
#      CSTEPS, TSTEPS (cloze's optimizer steps, median over steps 3..; and
#      PyTorch's timed steps after its 2 warm-up steps; defaults per config:
#      mini 10 and 8, base128 6 and 4, base512, large512 and gpt 5 and 3), to make a
#      run fit a hold of the machine.
# Prints one RESULT line per run, then a markdown table of medians.
set -euo pipefail
build=$(cd "$1" && pwd); shift
root=$(cd "$(dirname "$0")/.." && pwd)
configs=("$@"); [ ${#configs[@]} -gt 0 ] || configs=(mini:2 base128:2)
PRECISIONS=${PRECISIONS:-$(grep -q avx512_bf16 /proc/cpuinfo && echo "fp32 bf16" || echo fp32)}
TORCH_PRECISIONS=${TORCH_PRECISIONS:-$PRECISIONS}
PYTHON=${PYTHON:-/usr/bin/python3}
TORCH_PEERS=${TORCH_PEERS:-pypi-eager pypi-compile debian}
KERNELS=${KERNELS:-auto}
venv=${TORCH_VENV:-$build/torch-venv}
if [[ " $TORCH_PEERS " == *" pypi-"* ]] && [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv with PyPI's torch (several GB; once)" >&2
  if ! { "${VENV_PYTHON:-python3}" -m venv "$venv" &&
         "$venv/bin/pip" install -q torch numpy; } >"$build/torch-venv.log" 2>&1; then
    echo "could not install PyPI's torch into $venv (see $build/torch-venv.log): PyPI peers left out" >&2
    rm -rf "$venv"
    TORCH_PEERS=$(echo "$TORCH_PEERS" | tr ' ' '\n' | grep -v '^pypi-' | tr '\n' ' ')
  fi
fi
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
    large512) conf=bert-large; arch=bert; L=24; H=1024; A=16; T=512; B=2; P=80; csteps=5; tsteps=3 ;;
    gpt) conf=gpt1; arch=gpt; L=12; H=768; A=12; T=512; B=2; P=0; csteps=5; tsteps=3 ;;
    gpt2) conf=gpt2-124m; arch=gpt; L=12; H=768; A=12; T=1024; B=2; P=0; csteps=5; tsteps=3 ;;
    *) echo "e2e_vs_torch: unknown config $1" >&2; exit 2 ;;
  esac
  csteps=${CSTEPS:-$csteps}; tsteps=${TSTEPS:-$tsteps}
}

run_cloze() { # cfg ranks threads rep precision kernels
  local dir="$work/run-$1-$2x$3-$4-$5-$6" prog=$5
  [ "$6" = auto ] || prog=$5-$6
  rm -rf "$dir"
  [ -n "$FIXED_PEAK" ] || echo "peak probe: $(probe_peak) GFLOP/s"
  CLOZE_KERNELS=$6 "$root/launch/cloze-mpirun" -n "$2" -t "$3" "$build/cloze-train" \
    "$root/conf/$conf.cfg" --quiet \
    --set data.train_manifest="$work/data/train.manifest" --set train.run_dir="$dir" \
    --set model.vocab_size=30522 --set model.matmul_precision="$5" \
    --set data.seq=$T --set data.max_pred=$P \
    --set train.steps=$csteps --set train.global_batch=$B --set train.micro_batch=$((B / $2)) \
    --set train.peak_gflops="$(echo "$PEAK / $2" | bc -l)" --set train.ckpt_every=0 --set data.phase2_fraction=0 --set optim.warmup_steps=1 \
    >"$dir.log" 2>&1 || { echo "cloze run failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; return 1; }
  # median over steps 3.. (the first two warm up, as in the torch bench)
  "$PYTHON" - "$dir/metrics.jsonl" "$1" "$2" "$3" "$4" "$prog" >>"$results" <<'EOF'
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

run_torch() { # cfg ranks threads rep peer precision
  local args=(--arch $arch --layers $L --hidden $H --heads $A --seq $T --batch $B
              --vocab 30522 --steps $tsteps --threads $3 --precision $6) py=$PYTHON
  local prog=$5; [ "$6" = fp32 ] || prog=$5-$6
  [ "$P" -gt 0 ] && args+=(--max-pred $P)
  [ "$conf" = gpt2-124m ] && args+=(--layout pre_ln)
  case $5 in
    debian) args+=(--attn mha) ;;
    pypi-eager) py=$venv/bin/python; args+=(--attn sdpa) ;;
    pypi-compile) py=$venv/bin/python; args+=(--attn sdpa --compile) ;;
  esac
  # ranks as separate processes bound to one core each, like cloze-mpirun
  # (torch.distributed.run of torch 1.13 fails under Python 3.11)
  local line
  line=$(bash -c '
    n=$1; shift
    for r in $(seq 0 $((n - 1))); do
      bind=(); [ "$n" -gt 1 ] && bind=(taskset -c $r)
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$((2 / n)) \
        RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 "${bind[@]}" "$@" &
    done
    wait' _ "$2" "$py" "$root/bench/torch_train_bench.py" "${args[@]}" 2>&1 | grep '^torch ' || true)
  echo "$line" >&2
  local tps rss
  tps=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) tokens\/s.*/\1/p')
  rss=$(echo "$line" | sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p')
  tps=${tps:-nan}; rss=${rss:-nan}
  echo "RESULT torch-$prog $1 $2x$3 rep$4 tokens_per_s $tps mfu nan rss_mib $rss" | tee -a "$results"
}

# The 2-thread sgemm rate: per BERT-base linear shape the best sample (other
# jobs only ever lower a sample), then the median over the shapes. This
# guest's rate moves with its neighbours (one start-of-run probe read 166
# and another 172 GFLOP/s where most read 205-210), so without PEAK= it is
# probed again before every cloze run and MFU is taken over the median of
# all probes of the run (printed with their range).
probe_peak() {
  "$build/bench/bench-gemm_bench" --choice auto --threads 2 --quick \
    --rounds 2 2>/dev/null | awk -F'\t' '$1 == "sample" && $3 !~ /^attn/ {
      if ($5 > best[$3]) best[$3] = $5 } END {for (k in best) print best[k]}' |
    sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}' |
    tee -a "$work/peaks.txt"
}
: >"$work/peaks.txt"
FIXED_PEAK=${PEAK:-}
exec 9>>"$LOCK"
if [ -z "$FIXED_PEAK" ]; then
  flock 9
  PEAK=$(probe_peak)
  flock -u 9
  echo "peak: $PEAK GFLOP/s at the start (2-thread sgemm, BERT-base linear shapes; probed again before each cloze run)"
else
  echo "peak: $PEAK GFLOP/s (PEAK= given)"
fi
echo "machine: $(lscpu | grep 'Model name' | sed 's/  */ /g'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'); $(date -u '+%F %H:%M UTC'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cloze kernels (CLOZE_KERNELS): $KERNELS; precisions: cloze $PRECISIONS, torch $TORCH_PRECISIONS; torch peers: $TORCH_PEERS"
for peer in $TORCH_PEERS; do
  case $peer in debian) v=$("$PYTHON" -c 'import torch; print(torch.__version__)') ;;
    *) v=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null) ;; esac
  echo "  $peer: torch $v"
done
for item in "${configs[@]}"; do
  cfg=${item%%:*}; reps=${item#*:}; [ "$reps" != "$item" ] || reps=1
  shape "$cfg"
  for rep in $(seq 1 "$reps"); do
    for layout in "1 2" "2 1"; do
      flock 9
      for prec in $PRECISIONS; do
        for k in $KERNELS; do run_cloze "$cfg" $layout "$rep" "$prec" "$k" 9>&-; done
      done
      for peer in $TORCH_PEERS; do
        for prec in $TORCH_PRECISIONS; do
          # Debian's 1.13 fails under CPU autocast (layer_norm gets a bf16
          # input beside fp32 weights: "expected scalar type BFloat16 but
          # found Float"), so its bf16 run is left out
          [ "$peer/$prec" = debian/bf16 ] && continue
          run_torch "$cfg" $layout "$rep" "$peer" "$prec" 9>&-
        done
      done
      flock -u 9
    done
  done
done
echo "end: $(date -u '+%H:%M UTC'); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# Table: medians over repetitions; torch MFU uses cloze's FLOPs per token
# (same model, cz_model_forward_flops x 3), recovered from cloze's MFU.
final_peak=$PEAK
if [ -z "$FIXED_PEAK" ]; then
  final_peak=$(sort -n "$work/peaks.txt" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  echo "peak probes: $(wc -l <"$work/peaks.txt"), $(sort -n "$work/peaks.txt" | sed -n 1p)-$(sort -n "$work/peaks.txt" | tail -1) GFLOP/s, median $final_peak (the MFU denominator below)"
fi
"$PYTHON" - "$results" "$PEAK" "$final_peak" "$KERNELS" <<'EOF'
import math, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(zip(f[5::2], f[6::2]))
    runs[(f[2], f[3], f[1])].append({k: float(v) for k, v in kv.items()})
given, peak, kernels = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
names = {"mini": "BERT-mini T128 B32", "base128": "BERT-base T128 B8",
         "base512": "BERT-base T512 B2", "large512": "BERT-large T512 B2", "gpt": "GPT-1 T512 B2",
         "gpt2": "GPT-2 124M layout T1024 B2"}
med = lambda rs, k: statistics.median(r[k] for r in rs) if rs else float("nan")
# FLOPs per token from cloze's MFU (over `given`): the same model for every program
fpt = {}
for (cfg, layout, prog), rs in runs.items():
    if prog.startswith("cloze"):
        fpt[cfg] = statistics.median(r["mfu"] * given * 1e9 / r["tokens_per_s"] for r in rs)
print(f"cloze kernels (CLOZE_KERNELS): {kernels}; a -avx2 / -baseline suffix marks a forced path "
      "on this CPU. tokens/s: median over repetitions (runs in brackets); MFU = "
      f"tokens/s x FLOPs per token (3 x cz_model_forward_flops) / {peak:g} GFLOP/s, the median "
      "2-thread sgemm probe of the run")
print()
print("| model | program | 1 x 2 tokens/s | 2 x 1 tokens/s | best | MFU of best | peak RSS/rank (best) |")
print("|---|---|---|---|---|---|---|")
best = {}
for cfg in dict.fromkeys(k[0] for k in runs):
    for prog in dict.fromkeys(k[2] for k in runs if k[0] == cfg):
        cells, top = [], (float("-inf"), None)
        for layout in ("1x2", "2x1"):
            rs = runs.get((cfg, layout, prog), [])
            v = med(rs, "tokens_per_s")
            cells.append(f"{v:.0f} ({len(rs)})" if rs else "-")
            if rs and not math.isnan(v) and v > top[0]:
                top = (v, layout)
        if top[1] is None:
            continue
        best[(cfg, prog)] = top[0]
        rs = runs[(cfg, top[1], prog)]
        mfu = 100 * top[0] * fpt.get(cfg, float("nan")) / (peak * 1e9)
        print(f"| {names.get(cfg, cfg)} | {prog} | {cells[0]} | {cells[1]} | "
              f"{top[0]:.0f} ({top[1].replace('x', ' x ')}) | {mfu:.1f}% | {med(rs, 'rss_mib'):.0f} MiB |")
print()
# A program's precision is in its name (cloze-bf16, torch-pypi-eager-bf16):
# each cloze precision over the PyTorch peers of the same precision, then
# each side at its best precision and layout over the other's.
prec = lambda p: "bf16" if "bf16" in p.split("-") else "fp32"
print("| model | cloze, best layout, over each PyTorch of the same precision at its best layout |")
print("|---|---|")
for cfg in dict.fromkeys(k[0] for k in runs):
    for cp in [p for (c, p) in best if c == cfg and p.startswith("cloze")]:
        torches = [p for (c, p) in best if c == cfg and p.startswith("torch") and prec(p) == prec(cp)]
        parts = [f"{tp[6:]} {best[(cfg, cp)] / best[(cfg, tp)]:.2f}" for tp in torches]
        if torches:
            top = max(torches, key=lambda tp: best[(cfg, tp)])
            parts.append(f"**best PyTorch ({top[6:]}): {best[(cfg, cp)] / best[(cfg, top)]:.2f}**")
        print(f"| {names.get(cfg, cfg)}, {cp} | {'; '.join(parts)} |")
    clozes = [p for (c, p) in best if c == cfg and p.startswith("cloze") and p.count("-") == 1]
    torches = [p for (c, p) in best if c == cfg and p.startswith("torch")]
    if clozes and torches and len({prec(p) for p in torches}) > 1:
        cb = max(clozes, key=lambda p: best[(cfg, p)])
        tb = max(torches, key=lambda p: best[(cfg, p)])
        print(f"| {names.get(cfg, cfg)}, each side's best precision | {cb} over {tb[6:]}: "
              f"**{best[(cfg, cb)] / best[(cfg, tb)]:.2f}** |")
EOF
