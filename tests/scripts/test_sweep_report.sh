#!/usr/bin/env bash
# cloze-sweep report: the fits and the figures, from results.csv alone.
#  - a synthetic results.csv with a known power law L(N) = (N_c/N)^0.34 (with
#    a fixed +-0.3% noise pattern) and C proportional to N: the fitted alpha
#    and beta are within 1% of 0.34;
#  - a synthetic IsoFLOP results.csv (three FLOPs budgets, each a parabola in
#    ln N around N_opt = 0.1 C^0.5): the fitted exponent is within 1% of 0.5;
#  - the report of the real tiny sweep has a table row per point, and its
#    PNG and SVG figures decode as real images (check_images.py).
set -euo pipefail
source "$(dirname "$0")/sweep_common.sh"
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed (launch/debian-packages.txt: gnuplot-nox)"; exit 77; }
work=$(mktemp -d /tmp/cloze-sweep-report-XXXXXX)
ok=0
trap 'if [ $ok = 1 ]; then rm -rf "$work"; else echo "kept $work"; fi' EXIT
fail() { echo "FAIL: $*"; exit 1; }

$PY - "$work" <<'EOF'
import csv, math, os, sys
work = sys.argv[1]
head = ["point", "name", "status", "model.layers", "model.hidden", "model.heads", "train.seed",
        "budget_kind", "budget", "arch", "params", "params_nonemb", "flops_total", "tokens",
        "steps", "eval_loss", "eval_mlm_acc", "eval_nsp_acc", "error"]
# a fixed pseudo-random noise pattern in [-0.3%, +0.3%]
state = 12345
def noise():
    global state
    state = (1103515245 * state + 12345) % 2**31
    return 1 + 0.006 * (state / 2**31 - 0.5)
def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for i, r in enumerate(rows):
            w.writerow([i, f"p{i}", "done"] + r + [""])
# 1. L(N) = (N_c / N)^0.34, N_c = 1e14, steps fixed so that C = 6 N D
rows = []
for k in range(12):
    n = 1e6 * 10 ** (3 * k / 11)
    loss = (1e14 / n) ** 0.34 * noise()
    rows.append([2 + k, 64 * (k + 1), 1, 1, "steps", 1000, "bert", n * 1.5, n, 6 * n * 2e9, 2e9,
                 1000, loss, 0.3, 0.8])
write(os.path.join(work, "power.csv"), rows)
# 2. IsoFLOP: loss = 2 + 0.05 (ln N - ln N_opt)^2 with N_opt = 0.1 C^0.5
rows = []
for c in (1e18, 1e19, 1e20):
    opt = 0.1 * c ** 0.5
    for f in (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8):
        n = opt * f
        rows.append([4, 256, 4, 1, "flops", c, "gpt", n * 1.2, n, c, c / (6 * n), 100,
                     2 + 0.05 * math.log(f) ** 2, "", ""])
write(os.path.join(work, "isoflop.csv"), rows)
EOF
"$SWEEP" report --results "$work/power.csv" --out "$work/power" > /dev/null
"$SWEEP" report --results "$work/isoflop.csv" --out "$work/isoflop" > /dev/null
$PY - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
p = json.load(open(f"{work}/power/fits.json"))
alpha, beta = p["L_N"]["alpha"], p["L_C"]["beta"]
assert abs(alpha / 0.34 - 1) < 0.01, f"alpha {alpha}, expected 0.34 within 1%"
assert abs(beta / 0.34 - 1) < 0.01, f"beta {beta}, expected 0.34 within 1%"
assert abs(p["L_N"]["N_c"] / 1e14 - 1) < 0.2, p["L_N"]
assert 0 < p["L_N"]["alpha_err"] < 0.01, p["L_N"]
i = json.load(open(f"{work}/isoflop/fits.json"))
e = i["N_opt_C"]["exponent"]
assert abs(e / 0.5 - 1) < 0.01, f"N_opt exponent {e}, expected 0.5 within 1%"
for b in i["isoflop"]:
    want = 0.1 * b["budget"] ** 0.5
    assert abs(b["N_opt"] / want - 1) < 0.01, (b, want)
print(f"fits: alpha {alpha:.5f} +- {p['L_N']['alpha_err']:.5f}, beta {beta:.5f} (true 0.34); "
      f"N_opt ~ C^{e:.5f} (true 0.5)")
EOF
grep -q "α = 0.34" "$work/power/report.md" || { cat "$work/power/report.md"; fail "alpha not in report.md"; }
$PY "$SRC/tests/scripts/check_images.py" "$work/power" loss_vs_params loss_vs_compute
$PY "$SRC/tests/scripts/check_images.py" "$work/isoflop" isoflop optimal_size

# the real sweep's report
ref=$(reference_sweep)
cp "$ref/results.csv" "$work/tiny.csv"
"$SWEEP" report --results "$work/tiny.csv" --out "$work/tiny" > /dev/null
rows=$(grep -c '^| [0-9]* | [0-9]* | [0-9]* |' "$work/tiny/report.md")
[ "$rows" = 4 ] || { cat "$work/tiny/report.md"; fail "$rows table rows for 4 points"; }
grep -q '^| 2 | 64 | 1 |' "$work/tiny/report.md" || { cat "$work/tiny/report.md"; fail "no L=2 H=64 row"; }
grep -q '!\[Held-out loss against non-embedding parameters\](loss_vs_params.png)' "$work/tiny/report.md" ||
  fail "report.md does not embed the figure"
$PY "$SRC/tests/scripts/check_images.py" "$work/tiny" loss_vs_params loss_vs_compute isoflop
ok=1
echo "test_sweep_report: ok"
