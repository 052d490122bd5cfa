#!/usr/bin/env python3
"""loss_plot.py: training and held-out loss against step, one line per run,
from metrics.jsonl files (cloze-train's, or bench/gpt2_curve_torch.py's,
which writes the same keys), drawn with gnuplot.

usage: bench/loss_plot.py OUT_PREFIX TITLE LABEL=METRICS.jsonl [LABEL=...]

Writes OUT_PREFIX.png and OUT_PREFIX.svg. The training loss ("lm_loss" of
the step records) is drawn as the mean of the last SMOOTH steps (env,
default 20; a small batch makes single steps noisy); a non-finite step
breaks the line. The held-out losses ("eval_lm_loss") are points on a
dashed line in the same colour. Needs gnuplot (Debian: gnuplot-nox)."""
import json
import math
import os
import subprocess
import sys
import tempfile

# Okabe-Ito colours, as bench/netsim_plot.py (readable with the common
# colour-vision deficiencies).
COLOURS = ["#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]


def quoted(text):
    """text as a gnuplot single-quoted string ('' stands for ')."""
    return "'" + text.replace("'", "''") + "'"


def read(path):
    train, held = {}, {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except ValueError:
                sys.exit(f"loss_plot: {path}:{n}: not a JSON line")
            if "eval_lm_loss" in r:
                held[r["step"]] = r["eval_lm_loss"]
            elif "lm_loss" in r:
                train[r["step"]] = r["lm_loss"]
    if not train and not held:
        sys.exit(f"loss_plot: {path}: no lm_loss or eval_lm_loss records")
    return train, held


def main(argv):
    if len(argv) < 4 or any("=" not in a for a in argv[3:]):
        sys.exit(__doc__)
    prefix, title = argv[1], argv[2]
    smooth = int(os.environ.get("SMOOTH", "20"))
    tmp = tempfile.mkdtemp(prefix="loss-plot-")
    series = []
    for i, arg in enumerate(argv[3:]):
        label, path = arg.split("=", 1)
        train, held = read(path)
        colour = COLOURS[i % len(COLOURS)]
        tdat, hdat = os.path.join(tmp, f"t{i}.dat"), os.path.join(tmp, f"h{i}.dat")
        with open(tdat, "w") as f:
            window = []
            for s in sorted(train):
                v = train[s]
                if not math.isfinite(v):
                    window = []
                    f.write("\n")  # a blank line breaks a gnuplot line
                    continue
                window = (window + [v])[-smooth:]
                f.write(f"{s} {sum(window) / len(window)}\n")
        with open(hdat, "w") as f:
            for s in sorted(held):
                if math.isfinite(held[s]):
                    f.write(f"{s} {held[s]}\n")
        if train:
            series.append(f"'{tdat}' using 1:2 with lines lw 2 lc rgb '{colour}' "
                          f"title {quoted(f'{label}: training (mean of {smooth} steps)')}")
        if held:
            series.append(f"'{hdat}' using 1:2 with linespoints dt 2 lw 1.5 pt 7 ps 1 "
                          f"lc rgb '{colour}' title {quoted(label + ': held-out')}")
    script = []
    for term, ext in (("pngcairo", "png"), ("svg", "svg")):
        script += [f"set terminal {term} size 760,480 font 'Sans,10'",
                   f"set output '{prefix}.{ext}'", "set grid; set key top right",
                   f"set title {quoted(title)}", "set xlabel 'step'; set ylabel 'loss (nats per token)'",
                   "plot " + ", ".join(series), "unset output"]
    gp = os.path.join(tmp, "plot.gp")
    with open(gp, "w") as f:
        f.write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", gp], check=True)
    print(f"wrote {prefix}.png and {prefix}.svg")


if __name__ == "__main__":
    main(sys.argv)
