#!/usr/bin/env bash
# Writes a default pre-training corpus that any Debian 12 machine can obtain
# offline through its package manager: the reStructuredText sources of the
# Python 3.11 documentation (package python3.11-doc, about 12 MB of English
# prose). Output: the original BERT input format — one paragraph per line, a
# blank line between documents (one document per .rst file).
#
# usage: launch/default-corpus.sh OUT.txt [SOURCE_DIR]
#   OUT.txt     the corpus to write (replaced only once complete)
#   SOURCE_DIR  a directory of .rst.txt files (default: python3.11-doc's
#               /usr/share/doc/python3.11/html/_sources)
#   -h, --help  this text
set -euo pipefail
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -?*) echo "default-corpus: unknown option $a (try --help)" >&2; exit 2 ;;
  esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "default-corpus: usage: default-corpus.sh OUT.txt [SOURCE_DIR] (try --help)" >&2
  exit 2
fi
out=$1
src=${2:-/usr/share/doc/python3.11/html/_sources}
if [ ! -d "$src" ]; then
  echo "default-corpus: $src not found; install python3.11-doc or give a directory of text" >&2
  exit 1
fi
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# Markup is dropped, not interpreted: directives and comments (".. "), heading
# underlines, indented blocks (code, directive bodies) and table borders go;
# inline roles keep their text (":func:`len`" -> "len").
find "$src" -name '*.rst.txt' -print0 | LC_ALL=C sort -z | xargs -0 awk '
  FNR == 1 { if (para != "") print para; para = ""; if (NR > 1) print "" }
  /^[ \t]*$/ { if (para != "") print para; para = ""; next }
  /^\.\. / || /^[ \t]/ || /^[=*~^+#"`:.-]+[ \t]*$/ || /^[|+]/ { if (para != "") print para; para = ""; next }
  {
    line = $0
    gsub(/:[a-z:]+:`!?~?/, "", line); gsub(/`+_?/, "", line); gsub(/\*\*|\*/, "", line)
    gsub(/ <[^>]*>/, "", line)
    para = (para == "" ? line : para " " line)
  }
  END { if (para != "") print para }
' > "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "default-corpus: wrote $(wc -c < "$out") bytes, $(grep -c '^$' "$out") document breaks to $out" >&2
