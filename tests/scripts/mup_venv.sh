#!/usr/bin/env bash
# Creates (once) the Python environment of the µP reference test: a venv over
# Debian's /usr/bin/python3 (its torch 1.13, numpy and PyYAML via
# --system-site-packages) with Microsoft's mup 1.0.0 from PyPI, installed
# without its dependencies (torchvision, pandas, seaborn are for its plotting
# helpers; `import mup` needs torch and yaml).
#
#   mup_venv.sh DIR   prints DIR/bin/python on success; exit 77 with a reason
#                     when it cannot be made (no pip, no registry, no torch)
set -euo pipefail
dir=${1:?usage: mup_venv.sh DIR}
py=/usr/bin/python3
stamp="$dir/.cloze-mup-venv-1"
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ]; then
  echo "$dir/bin/python"
  exit 0
fi
skip() { echo "skip: $*" >&2; exit 77; }
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ]; then
  echo "$dir/bin/python"
  exit 0
fi
[ -x "$py" ] || skip "no $py"
"$py" -c 'import torch, numpy, yaml' 2>/dev/null ||
  skip "Debian's python3-torch / python3-numpy / python3-yaml are not installed"
rm -rf "$dir"
"$py" -m venv --system-site-packages "$dir" 2>/dev/null || skip "python3 -m venv failed (python3-venv missing?)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
if ! "$dir/bin/python" -m pip install -q --no-deps "mup==1.0.0" >"$dir/pip.log" 2>&1; then
  tail -3 "$dir/pip.log" >&2 || true
  skip "pip could not install mup 1.0.0 (no access to PyPI?)"
fi
"$dir/bin/python" -c 'import mup, torch' 2>>"$dir/pip.log" || skip "mup does not import (see $dir/pip.log)"
touch "$stamp"
echo "$dir/bin/python"
