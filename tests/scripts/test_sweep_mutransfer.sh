#!/usr/bin/env bash
# cloze-sweep report's µTransfer section on a results.csv of a learning-rate
# x width x parametrization sweep (2 seeds) whose held-out losses are
# parabolas in log2(lr): under "standard" the optimum falls one factor of 2
# per doubling of width (log2 lr* = -8 - log2(H / 64)), under "mup" it stays
# at 2^-8. The report must find each width's best rate, the drifts (3 and 0
# factors of 2 over 64 ... 512), the seed spread, and draw mutransfer.png.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-mutransfer-XXXXXX)
trap 'rm -rf "$work"' EXIT
$PY - "$work/results.csv" <<'PY'
import math, sys
with open(sys.argv[1], "w") as f:
    f.write("point,name,status,model.layers,model.hidden,model.heads,optim.lr,train.seed,"
            "model.parametrization,arch,params,params_nonemb,flops_total,tokens,eval_loss,error\n")
    i = 0
    for p in ("standard", "mup"):
        for h in (64, 128, 256, 512):
            for e in range(-12, -4):
                for seed in (1, 2):
                    opt = -8 - math.log2(h / 64) if p == "standard" else -8
                    loss = 3 + 0.1 * (e - opt) ** 2 + (0.01 if seed == 1 else -0.01)
                    f.write(f"{i},{p}_H{h}_lr{e}_s{seed},done,2,{h},{h // 64},{2.0 ** e:.10g},{seed},"
                            f"{p},gpt,{h * h * 30},{h * h * 24},{h * h * 24 * 6e5:.6g},100000,{loss:.6f},\n")
                    i += 1
PY
"$BIN/cloze-sweep" report --results "$work/results.csv" --out "$work/report" > "$work/log" 2>&1 ||
  { cat "$work/log"; exit 1; }
md=$work/report/report.md
sed -n '/Learning-rate transfer/,$p' "$md"
grep -q "^| 512 | 0.000488 | -11.00 | 3.0000 ± 0.0141 | 2 |$" "$md" || { echo "FAIL: standard's best at 512"; exit 1; }
grep -q "^| 512 | 0.00391 | -8.00 | 3.0000 ± 0.0141 | 2 |$" "$md" || { echo "FAIL: µP's best at 512"; exit 1; }
[ "$(grep -c 'Drift of the best learning rate across widths 64 ... 512: 3 factor' "$md")" = 1 ] &&
  [ "$(grep -c 'Drift of the best learning rate across widths 64 ... 512: 0 factor' "$md")" = 1 ] ||
  { echo "FAIL: drifts"; exit 1; }
if command -v gnuplot >/dev/null; then
  [ -s "$work/report/mutransfer.png" ] && [ -s "$work/report/mutransfer.svg" ] || { echo "FAIL: no figure"; exit 1; }
fi
echo "test_sweep_mutransfer: ok"
