#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan; the CMake project in
# tests/fuzz) and runs each one for a bounded time on a copy of its seed
# corpus (tests/fuzz/seeds/<harness>). Fails on any crash, failed property,
# leak, timeout, out-of-memory or sanitizer report, and prints the input
# that caused it (add it to tests/fuzz/crashers/<harness>/ once fixed: ctest
# replays them). Prints executions, time and corpus size per harness.
#
#   tests/fuzz/run.sh [--time SECONDS] [--jobs N] [--build DIR] [--keep DIR] [HARNESS...]
#     --time   seconds per harness (default 15, CI)
#     --jobs   harnesses run at once (default: the CPUs)
#     --keep   keep the grown corpora and logs in DIR (default: a temporary directory)
# Needs clang and libclang-rt-14-dev (launch/debian-packages.txt).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TIME=15
JOBS=$(getconf _NPROCESSORS_ONLN)
BUILD=$SRC/build-fuzz
KEEP=""
HARNESSES=()
while [ $# -gt 0 ]; do
    case $1 in
    --time) TIME=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) HARNESSES+=("$1"); shift ;;
    esac
done
# Without clang or its libFuzzer runtime the step is skipped, saying why
# (exit 0): the replay of seeds and crashers (ctest fuzz_*_regress) still runs.
command -v clang >/dev/null ||
    { echo "fuzz: SKIPPED: clang is not installed (launch/debian-packages.txt: clang)" >&2; exit 0; }
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"${TMPDIR:-/tmp}/cloze-fuzz-probe-$$.c"
if ! clang -fsanitize=fuzzer,address "${TMPDIR:-/tmp}/cloze-fuzz-probe-$$.c" -o "${TMPDIR:-/tmp}/cloze-fuzz-probe-$$" 2>/dev/null; then
    rm -f "${TMPDIR:-/tmp}/cloze-fuzz-probe-$$"*
    echo "fuzz: SKIPPED: clang cannot link -fsanitize=fuzzer (libclang-rt-14-dev is not installed)" >&2
    exit 0
fi
rm -f "${TMPDIR:-/tmp}/cloze-fuzz-probe-$$"*
cmake -S "$SRC/tests/fuzz" -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug >/dev/null ||
    { echo "fuzz: configure failed" >&2; exit 1; }
cmake --build "$BUILD" -j"$JOBS" >"$BUILD/build.log" 2>&1 ||
    { tail -30 "$BUILD/build.log" >&2; echo "fuzz: build failed" >&2; exit 1; }
if [ ${#HARNESSES[@]} -eq 0 ]; then
    for f in "$SRC"/tests/fuzz/fuzz_*.c; do HARNESSES+=("$(basename "$f" .c)"); done
fi
W=${KEEP:-$(mktemp -d /tmp/cloze-fuzz-run-XXXXXX)}
mkdir -p "$W"

run_one() { # run_one HARNESS: its corpus, log and verdict in $W/HARNESS.*
    local h=$1 c=$W/$h.corpus
    mkdir -p "$c" "$W/$h.tmp" "$W/$h.artifacts"
    # the seeds a kept corpus (--keep) lacks
    for s in "$SRC/tests/fuzz/seeds/$h"/*; do
        [ ! -f "$s" ] || [ -e "$c/${s##*/}" ] || cp "$s" "$c"/
    done
    local t0=$SECONDS rc=0
    CLOZE_FUZZ_TMP=$W/$h.tmp \
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
        LSAN_OPTIONS=suppressions=$SRC/tests/fuzz/lsan.supp:print_suppressions=0 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$BUILD/$h" -max_total_time="$TIME" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$W/$h.artifacts/" "$c" \
        >"$W/$h.log" 2>&1 || rc=$?
    echo "$rc $((SECONDS - t0))" >"$W/$h.rc"
}

echo "fuzz: ${#HARNESSES[@]} harnesses, ${TIME}s each, $JOBS at a time ($BUILD)" >&2
running=0
for h in "${HARNESSES[@]}"; do
    [ -x "$BUILD/$h" ] || { echo "fuzz: no harness $h" >&2; exit 1; }
    run_one "$h" &
    running=$((running + 1))
    if [ $running -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

fail=0
printf '%-18s %8s %12s %10s %8s  %s\n' harness seconds executions exec/s corpus result
for h in "${HARNESSES[@]}"; do
    read -r rc secs <"$W/$h.rc"
    # (none when the harness died before its final statistics)
    execs=$(awk '/stat::number_of_executed_units:/ { n = $2 } END { print n }' "$W/$h.log")
    corpus=$(ls "$W/$h.corpus" | wc -l)
    artifacts=$(ls "$W/$h.artifacts" 2>/dev/null)
    result=ok
    if [ "$rc" -ne 0 ] || [ -n "$artifacts" ] || grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)\|runtime error:" "$W/$h.log"; then
        result="FAILED (exit $rc)"
        fail=1
    fi
    printf '%-18s %8s %12s %10s %8s  %s\n' "$h" "$secs" "${execs:-?}" \
        "$([ -n "$execs" ] && [ "$secs" -gt 0 ] && echo $((execs / secs)) || echo ?)" "$corpus" "$result"
done
for h in "${HARNESSES[@]}"; do
    read -r rc secs <"$W/$h.rc"
    if [ "$rc" -ne 0 ] || [ -n "$(ls "$W/$h.artifacts" 2>/dev/null)" ]; then
        echo "---- $h: $(ls "$W/$h.artifacts" | tr '\n' ' ')" >&2
        grep -m1 -B2 -A25 "ERROR\|runtime error\|fuzz property failed\|deadly signal" "$W/$h.log" >&2 ||
            tail -25 "$W/$h.log" >&2
        for a in "$W/$h.artifacts"/*; do
            [ -f "$a" ] && echo "input ($(stat -c %s "$a") bytes, base64): $(head -c 600 "$a" | base64 -w0)" >&2
        done
    fi
done
if [ -n "$KEEP" ] || [ $fail -ne 0 ]; then
    echo "fuzz: corpora, logs and artifacts kept in $W" >&2
else
    rm -rf "$W"
fi
exit $fail
