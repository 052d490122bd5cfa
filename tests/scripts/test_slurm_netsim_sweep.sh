#!/usr/bin/env bash
# A sweep whose points span nodes, under real Slurm across 4 simulated hosts
# (launch/cloze-netsim slurm): a 2-point spec with nodes = 2 and
# ranks_per_node = 2, submitted with `cloze-sweep submit`, runs as a job
# array of two tasks at once, each on 2 nodes x 2 ranks (its log says so);
# status sees both points done and the report job's results.csv equals,
# timing columns aside, that of the same spec run on this one machine
# (4 ranks, the same ring all-reduce).
# Checked to fail: with cloze-sweep submit writing --ntasks instead of
# --nodes/--ntasks-per-node (a point's ranks not spread over 2 nodes) the
# test fails on the array script's request.
# Skips (77) where namespaces cannot be made or Slurm's daemons not started.
NAME_PREFIX=sls HOSTS=4 source "$(dirname "$0")/slurm_netsim_common.sh"
t0=$SECONDS
cat >"$work/spec.cfg" <<CFG
sweep:
{
  name = "nodes2";
  base = "$SRC/conf/bert-tiny.cfg";
  set = [ "data.seq=32", "data.max_pred=5", "train.global_batch=4", "train.micro_batch=1",
          "train.ckpt_every=10", "train.log_every=100", "train.peak_gflops=10",
          "optim.lr=1e-3", "optim.warmup_steps=0", "optim.warmup_fraction=0.1",
          "model.layers=1", "dist.allreduce=ring",
          "model.vocab_size=$(grep -c '' "$data/vocab.txt")",
          "data.train_manifest=$data/shards/train.manifest",
          "data.heldout_manifest=$data/shards/heldout.manifest" ];
  axes = ( { key = "model.hidden"; values = [32, 64]; } );
  budget = { steps = [20]; };
  eval = { batches = 2; };
  nodes = 2;
  ranks_per_node = 2;
  threads = 1;
};
CFG
sweep=$BIN/cloze-sweep
sl env CLOZE_NETWORK=198.18.0.0/15 OMPI_MCA_hwloc_base_binding_policy=none \
  "$sweep" submit "$work/spec.cfg" --dir "$work/sw" >"$work/submit.txt" || { cat "$work/submit.txt"; fail "submit"; }
cat "$work/submit.txt"
grep -qx "#SBATCH --nodes=2" "$work/sw/slurm/array.sbatch" &&
  grep -qx "#SBATCH --ntasks-per-node=2" "$work/sw/slurm/array.sbatch" ||
  { cat "$work/sw/slurm/array.sbatch"; fail "the array script does not ask for 2 nodes x 2 ranks"; }
report=$(sed -n 's/.* report job \([0-9]*\) .*/\1/p' "$work/submit.txt")
state=$(slurm_wait "$report" 200)
[ "$state" = COMPLETED ] || { cat "$work"/sw/slurm/*.out; fail "report job $report ended $state"; }
echo "array and report done after $((SECONDS - t0)) s"
# each point on 2 nodes x 2 ranks (cloze.sbatch's and cloze-train's lines in
# the point's train.log), the two on different nodes: both ran at once
for log in "$work"/sw/points/*/train.log; do
  grep -Eq "4 rank\(s\) on 2 node\(s\) \($name-h\[[0-3]-[0-3]\], 2\(x2\) per node\)" "$log" &&
    grep -Fq "gradient all-reduce: ring on 4 ranks, 2 hosts" "$log" ||
    { cat "$log"; fail "$log: the point did not run on 2 nodes x 2 ranks"; }
  grep -h "cloze.sbatch: job" "$log"
done
[ "$(grep -ho "($name-h[^,]*," "$work"/sw/points/*/train.log | sort -u | wc -l)" -eq 2 ] ||
  fail "the two points did not run on different nodes"
$sweep status "$work/spec.cfg" --dir "$work/sw" >"$work/status.txt" || { cat "$work/status.txt"; fail "status"; }
cat "$work/status.txt"
# the same spec on this machine
"$sweep" run "$work/spec.cfg" --dir "$work/local" --quiet >"$work/local.txt" 2>&1 || { cat "$work/local.txt"; fail "local run"; }
$PY "$SRC/tests/scripts/compare_results.py" "$work/local/results.csv" "$work/sw/results.csv" \
  --ignore wall_s,train_s,tokens_per_s,mfu --rows 2
ok=1
echo "test_slurm_netsim_sweep: ok ($((SECONDS - t0)) s)"
