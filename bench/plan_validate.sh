#!/usr/bin/env bash
# plan_validate.sh: cloze-plan's predictions against measured runs on
# simulated clusters (launch/cloze-netsim). Each configuration trains a few
# steps with cloze-train's own start-up calibration (dist.calibrate, the
# default: auto decides with it, and the run keeps it in RUN/network.txt);
# then cloze-plan, fed that run's network (--cluster-file RUN/network.txt)
# and its measured compute (--compute-from RUN/metrics.jsonl), predicts the
# step and its exposed communication.
#
#   bench/plan_validate.sh BUILD_DIR [options]
#     --steps S          steps per run (default 8; medians over steps 3..S)
#     --only N,M,...     only these configurations (numbers of the list below)
#     --manifest FILE    shards (default: bench_corpus.sh's)
#     --time-limit S     each training run is stopped after S s (default 300)
#     --name NAME        cluster name prefix (default pln)
#     --keep             keep the runs, logs and plans (their folder is printed)
#
# Configurations (model, hosts x ranks per host, rate, dist.allreduce,
# overlap): see the table `configs` below. Overlap off: dist.overlap=false
# where cloze-train has that key, else one bucket (dist.bucket_mb=10000:
# nothing can start before backward ends); on: dist.bucket_mb=2 (or the
# key's default with dist.overlap=true).
#
# Prints per configuration the measured and predicted step and exposed
# communication (medians over steps 3..S of step_seconds and
# comm_wait_seconds), the step's error, then the median and largest
# |error|, and per group of runs that differ only in dist.allreduce whether
# the planner's pick (the smallest predicted step in one plan: the auto
# run's calibration where the group has one) was measured fastest or within
# 3 % of it. Needs root (network namespaces). Every simulated host
# shares this machine's cores.
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h | --help) usage; exit 0 ;; esac
BUILD=$(cd "$1" && pwd)
shift
SRC=$(cd "$(dirname "$0")/.." && pwd)
steps=8 only="" manifest="" limit=300 prefix=pln
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --only) only=",$2," ; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    --time-limit) limit=$2; shift 2 ;;
    --name) prefix=$2; shift 2 ;;
    --keep) keep_work=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "plan_validate.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
[ "$steps" -ge 3 ] || { echo "plan_validate.sh: --steps must be >= 3" >&2; exit 2; }
NETSIM=$SRC/launch/cloze-netsim
for p in cloze-train cloze-plan; do
  [ -x "$BUILD/$p" ] || { echo "plan_validate.sh: $BUILD/$p is missing (build first)" >&2; exit 2; }
done
source "$SRC/bench/netsim_bench.sh"
netsim_bench_begin plan_validate.sh plan-validate "$prefix"
overlap_key=0
"$BUILD/cloze-train" --help-config 2>/dev/null | grep -q 'dist\.overlap' && overlap_key=1

# number model hosts rph rate allreduce overlap micro seq
configs="
1 tiny 2 1 100mbit ring on 8 128
2 tiny 2 1 100mbit ring off 8 128
3 tiny 2 1 250mbit ring on 8 128
4 tiny 4 1 250mbit ring on 8 128
5 tiny 4 1 250mbit ring off 8 128
6 tiny 8 1 250mbit ring on 4 128
7 tiny 2 2 250mbit ring on 8 128
8 tiny 2 2 250mbit hierarchical on 8 128
9 tiny 2 2 250mbit auto on 8 128
10 tiny 4 2 100mbit ring on 4 128
11 tiny 4 2 100mbit hierarchical on 4 128
12 tiny 4 2 100mbit auto on 4 128
13 mini 4 1 250mbit ring on 8 128
14 mini 4 1 250mbit ring off 8 128
15 mini 2 2 250mbit ring on 8 128
16 mini 2 2 250mbit hierarchical on 8 128
17 base 2 1 250mbit ring on 2 128
"
hyp=$(lscpu | sed -n 's/^Hypervisor vendor: *//p')
cpu() { lscpu | sed -n "s/^$1: *//p" | sed -n 1p; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), cloze $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# CPU: $(cpu 'Model name') (family $(cpu 'CPU family') model $(cpu Model)${hyp:+, $hyp guest}), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $steps steps per run, medians over steps 3..$steps; overlap off = $([ $overlap_key = 1 ] && echo dist.overlap=false || echo 'one bucket (no dist.overlap key)')"
: >"$work/rows"
cluster=""
echo "$configs" | while read -r num model hosts rph rate algo overlap micro seq; do
  [ -n "$num" ] || continue
  case $only in "" | *",$num,"*) ;; *) continue ;; esac
  if [ "$cluster" != "$hosts $rph $rate" ]; then
    "$NETSIM" --name "$name" down >/dev/null 2>&1 || true
    "$NETSIM" up --hosts "$hosts" --ranks-per-host "$rph" --rate "$rate" --name "$name" \
      --ttl $((limit * 4 + 600)) >/dev/null 2>&1
    cluster="$hosts $rph $rate"
  fi
  p=$((hosts * rph))
  sets=(--set model.vocab_size="$vocab_size" --set train.steps="$steps"
    --set train.global_batch=$((micro * p)) --set train.micro_batch="$micro" --set train.threads=1
    --set train.ckpt_every=0 --set train.eval_every=0 --set train.peak_gflops=100
    --set data.seq="$seq" --set data.max_pred=20 --set data.phase2_fraction=0 --set optim.lr=1e-4
    --set optim.warmup_steps=0 --set optim.warmup_fraction=0.1 --set dist.allreduce="$algo")
  if [ $overlap_key = 1 ]; then
    sets+=(--set dist.overlap=$([ "$overlap" = on ] && echo true || echo false))
  else
    sets+=(--set dist.bucket_mb=$([ "$overlap" = on ] && echo 2 || echo 10000))
  fi
  run=$work/run-$num
  timeout --kill-after=10 "$limit" "$NETSIM" --name "$name" mpirun -x OMP_NUM_THREADS=1 </dev/null \
    -x BLIS_NUM_THREADS=1 "$BUILD/cloze-train" "$SRC/conf/bert-$model.cfg" \
    --set data.train_manifest="$manifest" --set train.run_dir="$run" "${sets[@]}" --quiet \
    2>"$work/log-$num" || {
    echo "# run $num failed or passed --time-limit (left out): $(tail -1 "$work/log-$num")"
    continue
  }
  picked=$(sed -n 's/.*gradient all-reduce: \([a-z0-9]*\).*/\1/p' "$work/log-$num" | sed -n 1p)
  echo "# run $num: $(grep -h 'network between hosts' "$work/log-$num" | sed 's/.*info\] //')"
  "$BUILD/cloze-plan" "$SRC/conf/bert-$model.cfg" "${sets[@]}" --hosts "$hosts" \
    --ranks-per-host "$rph" --cluster-file "$run/network.txt" --compute-from "$run/metrics.jsonl" \
    --from-ranks "$p" --json >"$work/plan-$num" 2>"$work/plan-$num.err" ||
    { cat "$work/plan-$num.err" >&2; exit 1; }
  echo "$num $model $hosts $rph $rate $algo $overlap $micro ${picked:-ring} $run/metrics.jsonl $work/plan-$num" >>"$work/rows"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/rows" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("| # | model | hosts x rph | rate | all-reduce (ran) | overlap | step s | predicted | error | exposed s | predicted | reduction s | predicted | gather s | predicted |")
print("|---:|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
errs, groups = [], {}
for num, model, h, r, rate, algo, ov, micro, ran, metrics, plan in rows:
    recs = [json.loads(l) for l in open(metrics)]
    steps = [x for x in recs if "step_seconds" in x][2:]
    step = statistics.median(x["step_seconds"] for x in steps)
    wait = statistics.median(x["comm_wait_seconds"] for x in steps)
    comm = statistics.median(x["grad_comm_seconds"] for x in steps)
    gath = statistics.median(x["gather_seconds"] for x in steps)
    p = json.loads(open(plan).read().splitlines()[0])
    key = {"ring": "ring", "hierarchical": "hierarchical", "torus2d": "torus2d"}[ran]
    # the prediction for the algorithm that ran (auto: the one it picked)
    pstep = p["compute"] + p[key + "_exposed"] + p["optim"] + p["gather"] + p["control"]
    err = pstep / step - 1
    errs.append(abs(err))
    print(f"| {num} | {model} | {h}x{r} | {rate} | {algo} ({ran}) | {ov} | {step:.3f} | {pstep:.3f} | "
          f"{100 * err:+.1f} % | {wait:.3f} | {p[key + '_exposed']:.3f} | {comm:.3f} | {p[key + '_reduce']:.3f} | "
          f"{gath:.3f} | {p['gather']:.3f} |")
    groups.setdefault((model, h, r, rate, ov), []).append((algo, ran, step, p))
print(f"\nstep time |error|: median {100 * statistics.median(errs):.1f} %, max {100 * max(errs):.1f} % "
      f"over {len(errs)} runs")
autos_of = lambda runs: [x for x in runs if x[0] == "auto"]
right = total = 0
for g, runs in groups.items():
    fixed = [x for x in runs if x[0] != "auto"]
    if len(fixed) < 2:
        continue
    # the planner's pick, from ONE plan (one calibration, as a user would
    # plan): the auto run's where the group has one, else the first run's;
    # smallest predicted step among the algorithms that ran. With the sharded
    # placement an algorithm's weight all-gather is its reduce-scatter's
    # other half, so it costs the same as its reduction.
    ref = (autos_of(runs) or runs)[0][3]
    gath = lambda a: ref[a + "_reduce"] if ref["gather"] > 0 else 0.0
    pred = {x[0]: ref["compute"] + ref[x[0] + "_exposed"] + ref["optim"] + gath(x[0]) for x in fixed}
    pick = min(pred, key=pred.get)
    meas = {x[0]: x[2] for x in fixed}
    best = min(meas.values())
    ok = meas[pick] <= 1.03 * best
    right += ok
    total += 1
    autos = autos_of(runs)
    auto = f"; auto ran {autos[0][1]} ({autos[0][2]:.3f} s)" if autos else ""
    print(f"choice {g}: planner {pick}, measured " +
          ", ".join(f"{a} {t:.3f} s" for a, t in meas.items()) + f": {'right' if ok else 'WRONG'}{auto}")
if total:
    print(f"choice right (fastest or within 3 %): {right} of {total}")
PY
