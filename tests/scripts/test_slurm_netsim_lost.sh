#!/usr/bin/env bash
# A node lost mid-job under real Slurm across 4 simulated hosts
# (launch/cloze-netsim slurm): `sbatch --nodes=3-4 --ntasks-per-node=2
# launch/cloze.sbatch` trains BERT-tiny with exact sums (dist.exact = true)
# on 8 ranks; host 3's links go down once it has checkpoints. The ranks give
# up after dist.timeout_s, the script finds the node that runs no job step,
# names it in one line, marks it down and requeues the job, which runs on
# the 3 nodes that remain (6 ranks, its 16 micro-batches a step dealt
# unevenly: 3, 3, 3, 3, 2, 2), resumes from the newest checkpoint and
# finishes. Every metrics line (timings aside) and every checkpoint's
# params, adam_m and adam_v, those of 8 ranks before the loss and of 6
# after it, are byte-identical to those of the same run uninterrupted on
# one rank of one host (plain mpirun -np 1, no simulated network); every
# checkpoint and metrics line written before the loss is still there,
# unchanged.
# Checked to fail: with cloze.sbatch's `scontrol requeue` and its marking
# the node down removed, the job runs once and its log has no restart on 3
# nodes; without `--resume auto` the requeued run refuses the run
# directory's checkpoints and the job ends FAILED; with dist.exact = false
# (EXACT=false in the environment) the 8 ranks' first metrics line already
# differs from one rank's (grad_norm 1.38818025 against 1.38818028).
# Skips (77) where namespaces cannot be made or Slurm's daemons not started.
NAME_PREFIX=sll HOSTS=4 source "$(dirname "$0")/slurm_netsim_common.sh"
t0=$SECONDS
# long enough that the cut lands mid-run: 30 steps of 24 micro-batches took
# 2.1 s on 8 ranks at 10 Gbit/s once, and the job ended before the test cut
# the link (CI); 160 steps of 16 are about the micro-batches of 120 of 24
steps=160
# 16 micro-batches a step: 2 on each of 8 ranks, 3 or 2 on 6 (exact sums
# deal them unevenly)
args() { tiny_args "$data" "$1"; echo --set train.global_batch=16 --set train.micro_batch=1 \
  --set train.steps=$steps --set train.ckpt_every=5 --set train.keep_last=1000 \
  --set dist.allreduce=ring --set dist.timeout_s=3 --set dist.exact=${EXACT:-true}; }
run=$work/run
job=$(sub "$work/job.out" --nodes=3-4 --ntasks-per-node=2 -- $(args "$run"))
for _ in $(seq 600); do
  [ "$(ls "$run"/ckpt-*.lz4 2>/dev/null | wc -l)" -ge 2 ] && break
  sleep 0.2
done
[ "$(ls "$run"/ckpt-*.lz4 2>/dev/null | wc -l)" -ge 2 ] || { cat "$work/job.out"; fail "no checkpoints after 120 s"; }
grep -Fq "8 rank(s) on 4 node(s)" "$work/job.out" || { cat "$work/job.out"; fail "the job did not start on 4 nodes"; }
# what exists before the loss must survive it unchanged
(cd "$run" && sha256sum ckpt-*.lz4) >"$work/before.sums"
cp "$run/metrics.jsonl" "$work/before.metrics"
grep -q "\"step\": *$steps[,}]" "$work/before.metrics" &&
  { cat "$work/job.out"; fail "the job reached step $steps before the link was cut: raise steps"; }
tcut=$SECONDS
"$NETSIM" --name "$name" link 3 down
for _ in $(seq 600); do grep -q "lost node" "$work/job.out" && break; sleep 0.2; done
grep "lost node" "$work/job.out" || { cat "$work/job.out"; fail "no line naming the lost node 120 s after the cut"; }
grep -Fq "cloze.sbatch: lost node $name-h3 " "$work/job.out" || fail "the lost node is not $name-h3"
echo "the lost node named $((SECONDS - tcut)) s after the cut ($((SECONDS - t0)) s)"
state=$(slurm_wait "$job" 200)
[ "$state" = COMPLETED ] || { cat "$work/job.out"; fail "job $job ended $state"; }
echo "job $job: $state after $((SECONDS - t0)) s"
want="restart 1 after losing node $name-h3: 6 rank(s) on 3 node(s) ($name-h[0-2], 2(x3) per node)"
grep -Fq "$want" "$work/job.out" || { cat "$work/job.out"; fail "no '$want' in the job's log"; }
grep -Eq "resumed from .*: step [0-9]+, .*written by 8 rank\(s\), now 6" "$work/job.out" ||
  { cat "$work/job.out"; fail "the requeued job did not resume from the 8-rank checkpoint on 6 ranks"; }
grep -E "cloze.sbatch: (job|lost)|resumed from|gradient all-reduce|done:" "$work/job.out"
sl sinfo -h -N -o '%N %t' | grep -q "^$name-h3 down" || { sl sinfo -N; fail "$name-h3 is not down"; }
# nothing written before the loss is lost
(cd "$run" && sha256sum --quiet -c "$work/before.sums") || fail "a checkpoint written before the loss changed"
cmp -n "$(stat -c %s "$work/before.metrics")" "$work/before.metrics" "$run/metrics.jsonl" ||
  fail "metrics.jsonl lost lines written before the loss"
at=$($PY -c 'import json, sys
print([r for r in map(json.loads, open(sys.argv[1])) if r.get("resumed")][-1]["step"])' "$run/metrics.jsonl")
last=$($PY -c 'import json, sys
print([r for r in map(json.loads, open(sys.argv[1])) if "loss" in r][-1]["step"])' "$run/metrics.jsonl")
[ "$last" -eq "$steps" ] || fail "the job ended at step $last, not $steps"
# the reference: the same run uninterrupted on one rank of one host
mpi 1 "$BIN/cloze-train" $(args "$work/ref") 2>"$work/ref.log" || { cat "$work/ref.log"; fail "the reference run"; }
# metrics.jsonl less timings and the cost model's predictions, by step: the
# job's holds the steps after its newest checkpoint before the loss twice
# (8 ranks, then 6), each equal to the reference's
SCRIPTS="$SRC/tests/scripts" $PY - "$work/ref/metrics.jsonl" "$run/metrics.jsonl" <<'EOF' || fail "the job's metrics differ from one rank's"
import json, os, sys
sys.path.insert(0, os.environ["SCRIPTS"])
from metrics_numbers import records
ref = {r["step"]: json.dumps(r, sort_keys=True) for r in records(sys.argv[1])}
seen, bad = [], 0
for r in records(sys.argv[2]):
    s = json.dumps(r, sort_keys=True)
    if ref.get(r.get("step")) != s:
        bad += 1
        if bad <= 3:
            print(f"FAIL: job:      {s}\n      one rank: {ref.get(r.get('step'))}")
    seen.append(r.get("step"))
if set(seen) != set(ref):
    print(f"FAIL: the job's metrics lack steps {sorted(set(ref) - set(seen))}")
    bad += 1
if bad:
    sys.exit(1)
print(f"{len(seen)} metrics lines ({len(seen) - len(ref)} steps twice) the same as one rank's")
EOF
# every checkpoint, 8 ranks' before the loss and 6 ranks' after it
n=0
for c in "$run"/ckpt-*.lz4; do
  for b in params adam_m adam_v; do
    "$BIN/cloze-ckpt" dump-blob "$c" $b >"$work/blob.job" &&
      "$BIN/cloze-ckpt" dump-blob "$work/ref/${c##*/}" $b >"$work/blob.ref" || fail "${c##*/}: dump-blob $b"
    [ -s "$work/blob.job" ] && cmp -s "$work/blob.job" "$work/blob.ref" ||
      fail "${c##*/}: blob $b differs from the uninterrupted one-rank run's"
  done
  n=$((n + 1))
done
[ "$n" -eq $((steps / 5)) ] || fail "$n checkpoints in the job's run directory, not $((steps / 5))"
echo "$n checkpoints' params, adam_m, adam_v the same as one rank's"
ok=1
echo "test_slurm_netsim_lost: ok, resumed at step $at ($((SECONDS - t0)) s)"
