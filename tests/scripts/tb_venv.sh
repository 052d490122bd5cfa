#!/usr/bin/env bash
# Creates (once) a Python venv with the tensorboard package from PyPI, whose
# own event reader checks the event files cloze-train writes
# (tests/scripts/check_tfevents.py).
#
#   tb_venv.sh DIR    prints DIR/bin/python on success; exit 77 with a reason
#                     when it cannot be made (no venv module, no access to PyPI)
#
# A second call reuses DIR (stamp file).
set -euo pipefail
dir=${1:?usage: tb_venv.sh DIR}
py=${CLOZE_PYTHON:-/usr/bin/python3}
version=2.21.0
stamp="$dir/.cloze-tb-venv-$version"
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ]; then
  echo "$dir/bin/python"
  exit 0
fi
skip() { echo "skip: $*" >&2; exit 77; }
# Tests that share DIR run in parallel (ctest -j): the first makes it while
# the others wait on the lock, then find the stamp (as hf_venv.sh).
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ]; then
  echo "$dir/bin/python"
  exit 0
fi
command -v "$py" >/dev/null || skip "no $py"
rm -rf "$dir"
"$py" -m venv "$dir" 2>/dev/null || skip "python3 -m venv failed (python3-venv missing?)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
if ! "$dir/bin/python" -m pip install -q "tensorboard==$version" >"$dir/pip.log" 2>&1; then
  tail -3 "$dir/pip.log" >&2 || true
  skip "pip could not install tensorboard $version (no access to PyPI?)"
fi
"$dir/bin/python" -c 'from tensorboard.backend.event_processing.event_accumulator import EventAccumulator' \
  2>>"$dir/pip.log" || skip "tensorboard $version installed but does not import (see $dir/pip.log)"
touch "$stamp"
echo "$dir/bin/python"
