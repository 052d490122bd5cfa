#!/usr/bin/env bash
# docs/distributed.md's first section ("Run BERT-base on 16 hosts") runs as
# written on a simulated cluster of 2 hosts x 1 rank (launch/cloze-netsim):
# its shell block is taken from the doc (tests/scripts/doc_block.py), only
# the reader's values on its assignment line replaced (ranks per host, the
# network, the shards), and run in host 0 with a hostfile of the 2 hosts.
# What the simulated cluster needs beside the block comes through Open MPI's
# environment (the remote-shell agent into the other namespace, no binding:
# the hosts share this machine's cores), and build/cloze-train here appends
# a tiny model and 3 steps to the doc's own arguments (BERT-base's shape and
# batch would take minutes a step on 2 shared cores). Checks: cloze-plan
# printed a plan for 2 hosts; the run measured the network between 2 hosts,
# `auto` picked its all-reduce on 2 ranks, 2 hosts; metrics.jsonl holds
# the 3 steps and network.txt the 2 hosts.
# Skips (77) where namespaces cannot be made (not root, no veth or tbf).
set -euo pipefail
NAME_PREFIX=czd source "$(dirname "$0")/netsim_common.sh"
"$NETSIM" up --hosts 2 --ranks-per-host 1 --rate 1gbit --name "$name" --ttl 600 >/dev/null
eval "$("$NETSIM" --name "$name" info)"   # STATE, SUBNET

dir=$work/doc
mkdir -p "$dir/build"
$PY "$SRC/tests/scripts/doc_block.py" "$SRC/docs/distributed.md" \
  RANKS=1 NET="$SUBNET" DATA="$data/shards" >"$dir/block.sh"
cp "$STATE/hostfile" "$dir/hosts"
ln -s "$SRC/conf" "$dir/conf"
ln -s "$BIN/cloze-plan" "$dir/build/cloze-plan"
vocab=$(grep -c '' "$data/vocab.txt")
cat >"$dir/build/cloze-train" <<WRAP
#!/bin/sh
# the doc's arguments first, then a tiny model and 3 steps
exec "$BIN/cloze-train" "\$@" --set model.vocab_size=$vocab --set model.hidden=32 \\
  --set model.heads=2 --set model.layers=2 --set model.intermediate=64 \\
  --set data.seq=32 --set data.max_pred=5 --set data.phase2_fraction=0 \\
  --set train.steps=3 --set train.global_batch=8 --set train.threads=1 --set train.log_every=1 \\
  --set optim.warmup_steps=1
WRAP
chmod +x "$dir/build/cloze-train"

echo "--- the block of docs/distributed.md, as run:"
cat "$dir/block.sh"
echo "---"
export OMPI_MCA_plm_rsh_agent=$STATE/rsh-agent OMPI_MCA_plm_rsh_no_tree_spawn=1 \
  OMPI_MCA_hwloc_base_binding_policy=none
# like `cloze-netsim mpirun`: in host 0's namespace, under host 0's name
timeout 500 ip netns exec "$name-h0" unshare --uts /bin/sh -c \
  'hostname "$0" && cd "$1" && exec bash -euo pipefail block.sh' "$name-h0" "$dir" \
  >"$work/out.log" 2>&1 || { cat "$work/out.log"; echo "FAIL: the block exited non-zero"; exit 1; }

fail() { cat "$work/out.log"; echo "FAIL: $*"; exit 1; }
grep -Eq '^ +2 +2 ' "$work/out.log" || fail "no cloze-plan row for 2 hosts x 1 rank"
grep -q "network between hosts measured in .*(2 hosts" "$work/out.log" ||
  fail "no 'network between hosts measured' line for 2 hosts"
grep -q "gradient all-reduce: .* on 2 ranks, 2 hosts: picked by the alpha-beta model" "$work/out.log" ||
  fail "no 'gradient all-reduce: ... on 2 ranks, 2 hosts: picked by the alpha-beta model' line"
run=$dir/runs/base16
[ -s "$run/metrics.jsonl" ] || fail "no $run/metrics.jsonl"
$PY - "$run/metrics.jsonl" <<'PY' || fail "metrics.jsonl lacks the 3 steps"
import json, sys
steps = [r["step"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r and "step" in r]
assert max(steps) == 3, f"steps logged: {steps}"
PY
grep -Eq '^hosts +2$' "$run/network.txt" || fail "network.txt does not say 2 hosts: $(cat "$run/network.txt")"
grep -E '^ +hosts +ranks|^ +2 +2 |network between hosts measured|gradient all-reduce:' "$work/out.log" || true
echo "test_netsim_docs: ok"
