#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up and Release build, every ctest
# test, then the unit tests again under AddressSanitizer + UBSan, then the
# sweep tests from a build directory outside the checkout and a sweep from
# an install, then the aarch64 cross build and its unit tests under
# emulation, then the fuzzing step.
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

# ---- a build directory outside the checkout, and an install (owner:
# launch): the sweep tests from there, then a sweep from the installed
# prefix with the sources gone (tests/out_of_tree.sh; about 4 minutes) ----
echo "== out of tree: the sweep tests from another build directory, a sweep from an install ==" >&2
tests/out_of_tree.sh "$jobs"

# ---- aarch64 (owner: kernels): cross build with gcc-aarch64-linux-gnu, unit
# tests under qemu-aarch64 (about 2 minutes; skips with the reason when the
# cross tools or Debian's arm64 packages cannot be installed) ----
echo "== aarch64: cross build, unit tests under qemu-aarch64 (tests/aarch64/run.sh) ==" >&2
tests/aarch64/run.sh

# ---- fuzzing (owner: hardening): every reader of outside input under
# libFuzzer with ASan/UBSan/LSan, CLOZE_FUZZ_SECONDS each (default 20, two
# at a time: about 2.5 minutes with the clang build); fails on any crash,
# failed property, leak or sanitizer report, and on a slow unit only when
# it is slow again on replay (tests/fuzz/run.sh, docs/reliability.md) ----
echo "== fuzzing: each harness ${CLOZE_FUZZ_SECONDS:-20} s (tests/fuzz/run.sh) ==" >&2
tests/fuzz/run.sh --time "${CLOZE_FUZZ_SECONDS:-20}" --jobs "$jobs"
