#!/usr/bin/env bash
# A simulated cluster (launch/cloze-netsim): 4 hosts x 2 ranks, each host a
# network namespace with a tbf-shaped link to a switch, Open MPI over TCP
# between hosts and shared memory inside one.
#  1. MPI reports 4 hosts; ring, hierarchical and torus2d 2x4 on odd sizes
#     (some below the rank count): every rank's bits equal, the documented
#     summation order, within 1e-6 of a float64 sum (tests/test_comm_algos.c);
#     and the traffic really crossed every host's shaped link.
#  2. 20 BERT-tiny steps on the cluster with dist.allreduce = hierarchical,
#     torus2d 2x4 and auto equal 1 rank with 8 accumulated micro-batches
#     within 1e-5 relative (loss, MLM, NSP, gradient norm).
# Skips (77) where namespaces cannot be made (not root, no veth or tbf).
set -euo pipefail
NAME_PREFIX=czt source "$(dirname "$0")/netsim_common.sh"
# 10 Gbit/s links: the property tested is correctness across hosts; the
# cluster removes itself after 10 minutes whatever happens to this script
"$NETSIM" up --hosts 4 --ranks-per-host 2 --rate 10gbit --name "$name" --ttl 600 >/dev/null
ns() { timeout 300 "$NETSIM" --name "$name" mpirun -x OMP_NUM_THREADS -x BLIS_NUM_THREADS "$@"; }

# 1. collectives on real (simulated) hosts
before=$("$NETSIM" --name "$name" stats | awk '$2 == "eth0" { print $3 }' | paste -sd' ')
ns "$BIN/tests/test_comm_algos" --real-hosts 4 --grid 2x4
after=$("$NETSIM" --name "$name" stats | awk '$2 == "eth0" { print $3 }' | paste -sd' ')
$PY - "$before" "$after" <<'PY'
import sys
b = [int(x) for x in sys.argv[1].split()]
a = [int(x) for x in sys.argv[2].split()]
assert len(a) == 4, f"expected 4 host links, got {a}"
sent = [y - x for x, y in zip(b, a)]
# each host sends at least a few MB of the largest all-reduces over its link
assert all(s > 1_000_000 for s in sent), f"bytes sent per host link: {sent}"
print("bytes sent over each host's shaped link:", sent)
PY

# 2. training: the same global batch of 8 as 1 rank x 8 micro-batches and as
#    4 hosts x 2 ranks x 1
mpi 1 "$BIN/cloze-train" $(tiny_args "$data" "$work/np1") \
  --set train.steps=20 --set train.global_batch=8 --set train.micro_batch=1
for algo in hierarchical torus2d auto; do
  extra=()
  [ $algo != torus2d ] || extra=(--set dist.grid=2x4)
  ns "$BIN/cloze-train" $(tiny_args "$data" "$work/$algo") --set train.steps=20 \
    --set train.global_batch=8 --set train.micro_batch=1 --set dist.allreduce=$algo "${extra[@]}" \
    --set dist.placement=sharded 2> "$work/$algo.log" || { cat "$work/$algo.log"; exit 1; }
  # the log says what runs (and, for auto, why)
  case $algo in
    hierarchical) want="gradient all-reduce: hierarchical (4 hosts x 2 ranks) on 8 ranks, 4 hosts" ;;
    torus2d) want="gradient all-reduce: torus2d 2x4 on 8 ranks" ;;
    auto) want="picked by the alpha-beta model" ;;
  esac
  grep -qF "$want" "$work/$algo.log" || { echo "FAIL: no '$want' in the log:"; cat "$work/$algo.log"; exit 1; }
  $PY "$SRC/tests/scripts/compare_metrics.py" "$work/np1/metrics.jsonl" "$work/$algo/metrics.jsonl" \
    --rel 1e-5 --fields loss,mlm_loss,nsp_loss,grad_norm
done
echo "test_netsim: ok"
