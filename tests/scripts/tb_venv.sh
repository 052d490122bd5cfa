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
. "$(dirname "$0")/venv_common.sh"
venv_once "$dir" "$stamp" "$dir/bin/python"
command -v "$py" >/dev/null || skip "no $py"
rm -rf "$dir"
"$py" -m venv "$dir" 2>/dev/null || skip "python3 -m venv failed (python3-venv missing?)"
venv_pip "$dir" "tensorboard $version (no access to PyPI?)" "tensorboard==$version"
"$dir/bin/python" -c 'from tensorboard.backend.event_processing.event_accumulator import EventAccumulator' \
  2>>"$dir/pip.log" || skip "tensorboard $version installed but does not import (see $dir/pip.log)"
touch "$stamp"
echo "$dir/bin/python"
