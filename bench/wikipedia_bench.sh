#!/usr/bin/env bash
# Throughput of BERT's Wikipedia path per core, dump -> shards, on the dump
# excerpts of ../shared/data/corpus/wikipedia (docs/data.md, "BERT's corpus:
# Wikipedia and books"): each step on one core, its CPU seconds (user + sys,
# less sensitive than wall time to other jobs on a shared machine) and wall
# seconds, the best of ROUNDS, per MB of dump XML and per article; the step
# that bounds the path; what the real dump (6.8 M articles, about 22 GB of
# bzip2) costs at these rates. Prints the load average before and after.
#
#   bench/wikipedia_bench.sh [BUILD_DIR] [ROUNDS]     (default build, 3)
#
# Steps: (1) bzip2 -d alone (the part of WikiExtractor's read that is
# decompression), (2) WikiExtractor 3.1.0 --processes 1 (its venv:
# tests/scripts/wikiextractor_venv.sh, in BUILD_DIR), (3) cloze-prep shards
# --threads 1 without MPI on its output (BERT uncased WordPiece, passages on).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
ROUNDS=${2:-3}
D=${CLOZE_SHARED_DATA:-$SRC/../shared/data}
W=$D/corpus/wikipedia
VOCAB=$D/vocab/bert-base-uncased/vocab.txt
for f in "$W/enwiki-sample-a.xml.bz2" "$W/enwiki-table-markup.xml.bz2" "$VOCAB"; do
  [ -f "$f" ] || { echo "wikipedia_bench: $f is absent (../shared/data)" >&2; exit 77; }
done
VENV=$("$SRC/tests/scripts/wikiextractor_venv.sh" "$BUILD/wikiextractor-venv")
T=$(mktemp -d /tmp/cloze-wiki-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir "$T/dump"
cp "$W/enwiki-sample-a.xml.bz2" "$W/enwiki-table-markup.xml.bz2" "$T/dump/"
load0=$(cut -d' ' -f1-3 /proc/loadavg)

# best (lowest CPU) of ROUNDS runs of a command: "cpu wall"
timed() {
  local best="" r
  for r in $(seq "$ROUNDS"); do
    /usr/bin/time -f "%U %S %e" -o "$T/time" "$@" >/dev/null 2>"$T/stderr" ||
      { cat "$T/stderr" >&2; echo "wikipedia_bench: failed: $*" >&2; exit 1; }
    read -r u s e <"$T/time"
    local cpu
    cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
    if [ -z "$best" ] || awk -v a="$cpu" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then best="$cpu $e"; fi
  done
  echo "$best"
}
xml_bytes=$(for f in "$T"/dump/*.bz2; do bzip2 -dc "$f"; done | wc -c)
bz_bytes=$(cat "$T"/dump/*.bz2 | wc -c)
articles=$(for f in "$T"/dump/*.bz2; do bzip2 -dc "$f"; done | "$VENV/bin/python" -c '
import re, sys
x = sys.stdin.read()
print(sum(1 for p in re.findall(r"<page>.*?</page>", x, re.S)
          if "<ns>0</ns>" in p and "<redirect" not in p))')

# a dump of one short article (the sample's header, its first article cut
# to a line): what a WikiExtractor run costs before any text (Python, its
# processes), subtracted from the rates below as a fixed cost per part file
bzip2 -dc "$T/dump/enwiki-sample-a.xml.bz2" | "$VENV/bin/python" -c '
import re, sys
x = sys.stdin.read()
head = x[:x.index("<page>")]
page = re.sub(r"(<text[^>]*>).*?(</text>)", r"\1A short article of one line.\2",
              x[x.index("<page>"):x.index("</page>") + 7], flags=re.S)
sys.stdout.write(head + page + "\n</mediawiki>\n")' | bzip2 >"$T/one.xml.bz2"
s0=$(timed "$VENV/bin/python" -m wikiextractor.WikiExtractor -q --processes 1 -o "$T/one" "$T/one.xml.bz2")
parts=$(ls "$T"/dump/*.bz2 | wc -l)
s1=$(timed sh -c 'for f in "$0"/*.bz2; do bzip2 -dc "$f"; done >/dev/null' "$T/dump")
extract() {
  rm -rf "$T/extracted"
  for f in "$T"/dump/*.bz2; do
    "$VENV/bin/python" -m wikiextractor.WikiExtractor -q --processes 1 \
      -o "$T/extracted/$(basename "$f" .xml.bz2)" "$f"
  done
}
export -f extract
export T VENV
s2=$(timed bash -c extract)
text_bytes=$(cat "$T"/extracted/*/*/* | wc -c)
s3=$(timed sh -c 'rm -rf "$0/shards"; "$1" shards --vocab "$2" --out "$0/shards" --shards 4 --threads 1 --quiet "$0/extracted"' \
  "$T" "$BUILD/cloze-prep" "$VOCAB")
load1=$(cut -d' ' -f1-3 /proc/loadavg)

"$VENV/bin/python" - "$xml_bytes" "$bz_bytes" "$articles" "$text_bytes" "$s1" "$s2" "$s3" \
  "$load0" "$load1" "$ROUNDS" "$s0" "$parts" <<'PYEOF'
import sys
xml, bz, art, text = (int(x) for x in sys.argv[1:5])
start_cpu, start_wall = (float(x) for x in sys.argv[11].split())
parts = int(sys.argv[12])
steps = [("bzip2 -d (inside WikiExtractor's read)", sys.argv[5]),
         ("WikiExtractor 3.1.0, --processes 1", sys.argv[6]),
         ("cloze-prep shards --threads 1", sys.argv[7])]
load0, load1, rounds = sys.argv[8], sys.argv[9], sys.argv[10]
print(f"sample: {art} articles, {bz / 1e6:.2f} MB bzip2, {xml / 1e6:.2f} MB XML, "
      f"{text / 1e6:.2f} MB extracted text; best of {rounds}; load average {load0} -> {load1}")
print(f"WikiExtractor start-up (a one-article dump): {start_cpu:.2f} CPU s, {start_wall:.2f} s wall "
      f"per part file; the rates below leave it out ({parts} part files)")
print(f"{'step':40s} {'CPU s':>7s} {'wall s':>7s} {'MB XML/s':>9s} {'articles/s':>11s}  per core")
total = 0.0
worst = None
for name, v in steps:
    cpu, wall = (float(x) for x in v.split())
    if name.startswith("WikiExtractor"):
        cpu, wall = cpu - parts * start_cpu, wall - parts * start_wall
    if "bzip2" not in name:  # inside WikiExtractor's own time already
        total += cpu
        if worst is None or cpu > worst[1]:
            worst = (name, cpu)
    print(f"{name:40s} {cpu:7.2f} {wall:7.2f} {xml / 1e6 / cpu:9.2f} {art / cpu:11.1f}")
print(f"{'whole path (WikiExtractor + cloze-prep)':40s} {total:7.2f} {'':7s} "
      f"{xml / 1e6 / total:9.2f} {art / total:11.1f}")
print(f"bound by: {worst[0]} ({100 * worst[1] / total:.0f}% of the path's CPU time)")
# the real dump at these rates: by bytes (at the sample's XML/bzip2 ratio)
# and by articles; the sample holds Wikipedia's first articles, long ones
# (about 60 KB of XML each, where the whole dump averages far less per
# article), so the per-article figure is an upper bound
real_bz, real_art = 22e9, 6.8e6
real_xml = real_bz * xml / bz
print(f"real dump (22 GB bzip2 -> {real_xml / 1e9:.0f} GB XML at the sample's ratio, "
      f"{real_art / 1e6:.1f} M articles), core-hours:")
for name, v in steps[1:]:
    cpu = float(v.split()[0]) - (parts * start_cpu if name.startswith("WikiExtractor") else 0)
    print(f"  {name:40s} {real_xml / (xml / cpu) / 3600:7.1f} by bytes, "
          f"{real_art / (art / cpu) / 3600:7.1f} by articles")
PYEOF
