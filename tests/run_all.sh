#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up and Release build, every ctest
# test, then the unit tests again under AddressSanitizer + UBSan.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
launch/setup-debian.sh
jobs=$(getconf _NPROCESSORS_ONLN)
ctest --test-dir build --output-on-failure -j"$jobs" "$@"
echo "== unit tests under AddressSanitizer/UBSan ==" >&2
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCLOZE_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit -LE slow
