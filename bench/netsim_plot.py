#!/usr/bin/env python3
"""netsim_plot.py: bus bandwidth against message size, from the output of
bench/netsim_allreduce.sh, one panel per run, drawn with gnuplot.

usage: bench/netsim_plot.py OUT_PREFIX RUN.txt [RUN.txt ...]

Writes OUT_PREFIX.png and OUT_PREFIX.svg. Each RUN.txt is what
netsim_allreduce.sh printed (its "# cluster:" line titles the panel); every
`<algo>_GB/s` column of the bench's table becomes a line, the alpha-beta
bound (`bound_GB/s`) a dashed one. Needs gnuplot (Debian: gnuplot-nox)."""
import os
import subprocess
import sys
import tempfile

# One colour per algorithm in every panel (Okabe-Ito, readable with the
# common colour-vision deficiencies); an algorithm not listed gets grey.
COLOURS = {
    "ring": "#0072B2",
    "hierarchical": "#009E73",
    "torus2d": "#CC79A7",
    "mpi": "#E69F00",
    "mpi ring": "#D55E00",
    "mpi rabenseifner": "#56B4E9",
    "bound": "black",
}


def read_run(path):
    title, header, rows = os.path.basename(path), None, []
    with open(path) as f:
        for line in f:
            if line.startswith("# cluster:"):
                title = line[len("# cluster:"):].strip()
            words = line.split()
            if words and words[0] == "bytes":
                header = words
            elif header and words and words[0].isdigit() and len(words) >= len(header) - 1:
                rows.append(words)
    if not header or not rows:
        sys.exit(f"netsim_plot: {path}: no bench table (a 'bytes ...' header and rows)")
    return title, header, rows


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    prefix, runs = argv[1], [read_run(p) for p in argv[2:]]
    tmp = tempfile.mkdtemp(prefix="netsim-plot-")
    panels = []
    for i, (title, header, rows) in enumerate(runs):
        cols = [j for j, h in enumerate(header) if h.endswith("_GB/s")]
        data = os.path.join(tmp, f"run{i}.dat")
        with open(data, "w") as f:
            for r in rows:
                f.write(" ".join([str(int(r[0]) / 2**20)] + [r[j] for j in cols]) + "\n")
        series = []
        for k, j in enumerate(cols):
            name = header[j][: -len("_GB/s")].replace("_", " ")
            # ours solid, Open MPI's dashed, the bound black
            colour = f"lc rgb '{COLOURS.get(name, 'grey')}'"
            style = ("dt 2 lw 2" if name == "bound" else
                     "dt 4 lw 2 pt 6 ps 0.8" if name.startswith("mpi") else "lw 2 pt 7 ps 0.8")
            style += " " + colour
            kind = "lines" if name == "bound" else "linespoints"
            series.append(f"'{data}' using 1:{k + 2} with {kind} {style} title '{name}'")
        panels.append((title, series))
    script = []
    n = len(panels)
    for term, ext, size in (("pngcairo", "png", f"{560 * n},480"), ("svg", "svg", f"{560 * n},480")):
        script.append(f"set terminal {term} size {size} font 'Sans,10'")
        script.append(f"set output '{prefix}.{ext}'")
        script.append(f"set multiplot layout 1,{n}")
        script.append("set logscale x 2; set grid; set key below maxrows 2")
        script.append("set xlabel 'all-reduce size (MiB)'; set ylabel 'bus bandwidth (GB/s)'")
        script.append("set yrange [0:*]")
        for title, series in panels:
            script.append(f"set title '{title}'")
            script.append("plot " + ", ".join(series))
        script.append("unset multiplot")
        script.append("unset output")
    gp = os.path.join(tmp, "plot.gp")
    with open(gp, "w") as f:
        f.write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", gp], check=True)
    print(f"wrote {prefix}.png and {prefix}.svg")


if __name__ == "__main__":
    main(sys.argv)
