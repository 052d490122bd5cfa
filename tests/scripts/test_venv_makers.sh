#!/usr/bin/env bash
# The venv makers of the tests (tests/scripts/*_venv.sh) are called by tests
# that ctest runs in parallel. Three concurrent calls on one new directory
# must all print the venv, exit 0 and leave one working venv. Before the
# makers took a lock, the later ones removed the first one's half-built venv
# and skipped or failed (CI's clean clone: test_hf_interop and test_gpt2_hf).
# Maker 1 is inside its install when 2 and 3 start.
# Uses wikiextractor_venv.sh (the smaller install; hf_venv.sh has the same
# lock); skipped when a single maker cannot reach PyPI.
set -euo pipefail
: "${CLOZE_BUILD_DIR:?run through ctest}" "${CLOZE_SOURCE_DIR:?run through ctest}"
maker=$CLOZE_SOURCE_DIR/tests/scripts/wikiextractor_venv.sh
work=$CLOZE_BUILD_DIR/test_venv_makers
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
dir=$work/venv
make() {
  local rc=0
  "$maker" "$dir" >"$work/out.$1" 2>"$work/err.$1" || rc=$?
  echo $rc >"$work/rc.$1"
}
# maker 1 starts; 2 and 3 start once it has made the venv and is installing
# into it (bounded wait), which is where ctest's parallel tests met in CI
make 1 &
for _ in $(seq 600); do
  [ -e "$dir/pyvenv.cfg" ] || [ -e "$work/rc.1" ] && break
  sleep 0.05
done
make 2 &
make 3 &
wait
rcs="$(cat "$work/rc.1") $(cat "$work/rc.2") $(cat "$work/rc.3")"
if [ "$rcs" = "77 77 77" ] && grep -q "no access to PyPI" "$work/err.1"; then
  cat "$work/err.1" >&2
  exit 77
fi
fail=0
for i in 1 2 3; do
  if [ "$(cat "$work/rc.$i")" != 0 ] || [ "$(cat "$work/out.$i")" != "$dir" ]; then
    echo "FAIL: maker $i of 3: exit $(cat "$work/rc.$i"), printed '$(cat "$work/out.$i")':" >&2
    cat "$work/err.$i" >&2
    fail=1
  fi
done
"$dir/bin/python" -m wikiextractor.WikiExtractor --help >/dev/null ||
  { echo "FAIL: the venv left behind does not run WikiExtractor" >&2; fail=1; }
[ $fail = 0 ] && echo "ok: 3 concurrent makers, one venv"
exit $fail
