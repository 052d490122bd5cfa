#!/usr/bin/env bash
# Creates (once) a Python venv with WikiExtractor 3.1.0 from PyPI, the
# extractor of BERT's Wikipedia recipe (docs/data.md, "BERT's corpus:
# Wikipedia and books").
#
#   wikiextractor_venv.sh DIR    prints DIR (the venv) on success; exit 77 with
#                                a reason when it cannot be made (no venv
#                                module, no access to PyPI)
#
# A second call reuses DIR (stamp file).
set -euo pipefail
dir=${1:?usage: wikiextractor_venv.sh DIR}
py=${CLOZE_PYTHON:-/usr/bin/python3}
stamp="$dir/.cloze-wikiextractor-venv-3.1.0"
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ]; then
  echo "$dir"
  exit 0
fi
skip() { echo "skip: $*" >&2; exit 77; }
# Tests that share DIR run in parallel (ctest -j): the first makes it while
# the others wait on the lock, then find the stamp. Without the lock two
# makers removed each other's half-built venv (CI, a clean clone).
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ]; then
  echo "$dir"
  exit 0
fi
command -v "$py" >/dev/null || skip "no $py"
rm -rf "$dir"
"$py" -m venv "$dir" 2>/dev/null || skip "python3 -m venv failed (python3-venv missing?)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
if ! "$dir/bin/python" -m pip install -q "wikiextractor==3.1.0" >"$dir/pip.log" 2>&1; then
  tail -3 "$dir/pip.log" >&2 || true
  skip "pip could not install wikiextractor 3.1.0 (no access to PyPI?)"
fi
"$dir/bin/python" -m wikiextractor.WikiExtractor --help >/dev/null 2>>"$dir/pip.log" ||
  skip "wikiextractor 3.1.0 installed but does not run (see $dir/pip.log)"
touch "$stamp"
echo "$dir"
