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
. "$(dirname "$0")/venv_common.sh"
venv_once "$dir" "$stamp" "$dir"
command -v "$py" >/dev/null || skip "no $py"
rm -rf "$dir"
"$py" -m venv "$dir" 2>/dev/null || skip "python3 -m venv failed (python3-venv missing?)"
venv_pip "$dir" "wikiextractor 3.1.0 (no access to PyPI?)" "wikiextractor==3.1.0"
"$dir/bin/python" -m wikiextractor.WikiExtractor --help >/dev/null 2>>"$dir/pip.log" ||
  skip "wikiextractor 3.1.0 installed but does not run (see $dir/pip.log)"
touch "$stamp"
echo "$dir"
