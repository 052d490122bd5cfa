#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan; the CMake project in
# tests/fuzz) and runs each one for a bounded time on a copy of its seed
# corpus (tests/fuzz/seeds/<harness>). Fails on any crash, failed property,
# leak, out-of-memory or sanitizer report, and prints the input that caused
# it (add it to tests/fuzz/crashers/<harness>/ once fixed: ctest replays
# them). A slow unit or timeout is replayed first (up to 3 times): only an
# input that is slow again (SLOW_S, 10 s) is a finding; one that replays
# fast was a stall of the machine, listed and kept in $W/<harness>.stalls/.
# Prints executions, time and corpus size per harness.
#
#   tests/fuzz/run.sh [--time SECONDS] [--jobs N] [--build DIR] [--keep DIR] [HARNESS...]
#     --time   seconds per harness (default 15, CI)
#     --jobs   harnesses run at once (default: the CPUs)
#     --keep   keep the grown corpora and logs in DIR (default: a temporary
#              directory); a kept DIR's corpora are reused, its artifacts of
#              an earlier run are not (each run starts with none)
#   tests/fuzz/run.sh --self-test   the triage of slow units, on planted artifacts
# Needs clang and libclang-rt-14-dev (launch/debian-packages.txt).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TIME=15
# a unit slower than this is reported (libFuzzer's -report_slow_units) and
# replayed; -timeout is the same bound, past which the harness stops
SLOW_S=10
REPLAYS=3
JOBS=$(getconf _NPROCESSORS_ONLN)
BUILD=$SRC/build-fuzz
KEEP=""
SELF_TEST=0
HARNESSES=()
while [ $# -gt 0 ]; do
    case $1 in
    --time) TIME=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --self-test) SELF_TEST=1; shift ;;
    -h | --help) sed -n '2,/^# Needs clang/p' "$0"; exit 0 ;;
    *) HARNESSES+=("$1"); shift ;;
    esac
done
FUZZ_ENV=()
fuzz_env() { # the sanitizers' settings of a run and of a replay
    FUZZ_ENV=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
        LSAN_OPTIONS=suppressions=$SRC/tests/fuzz/lsan.supp:print_suppressions=0
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
}
fuzz_env

# replay H INPUT: runs the harness once on INPUT (as the run did, with its
# limits); prints the milliseconds it took, fails when the harness failed
replay() {
    local h=$1 t0 rc=0
    t0=$(date +%s%N)
    env CLOZE_FUZZ_TMP="$W/$h.tmp" "${FUZZ_ENV[@]}" "$BUILD/$h" -timeout="$SLOW_S" \
        -rss_limit_mb=2048 -malloc_limit_mb=1024 "$2" >>"$W/$h.replay.log" 2>&1 || rc=$?
    echo $((($(date +%s%N) - t0) / 1000000))
    return $rc
}

# triage H: each slow-unit-* and timeout-* artifact of H is replayed, up to
# REPLAYS times; the first replay that passes under SLOW_S moves it to
# $W/H.stalls (the machine stalled while it ran: not a finding). What stays
# in $W/H.artifacts is a finding: crashes, leaks, out-of-memory, and slow
# units that were slow on every replay. One line per replayed unit in
# $W/H.triage.
triage() {
    local h=$1 a ms i fast
    : >"$W/$h.triage"
    for a in "$W/$h.artifacts"/slow-unit-* "$W/$h.artifacts"/timeout-*; do
        [ -f "$a" ] || continue
        fast=0
        for i in $(seq "$REPLAYS"); do
            if ms=$(replay "$h" "$a") && [ "$ms" -lt $((SLOW_S * 1000)) ]; then
                fast=1
                break
            fi
        done
        if [ $fast = 1 ]; then
            mkdir -p "$W/$h.stalls"
            mv "$a" "$W/$h.stalls/"
            echo "${a##*/}: replayed in $ms ms (under ${SLOW_S} s): a stall, not a finding" >>"$W/$h.triage"
        else
            echo "${a##*/}: slow again on $REPLAYS replays (last $ms ms): a finding" >>"$W/$h.triage"
        fi
    done
}

# verdict H: "ok" or "FAILED (exit N)" from H's exit status, its artifacts
# after triage and its log. A timeout whose unit was a stall ends the run
# early with libFuzzer's timeout status; that alone is no failure.
verdict() {
    local h=$1 rc secs
    read -r rc secs <"$W/$h.rc"
    if [ "$rc" -ne 0 ] && [ -z "$(ls "$W/$h.artifacts" 2>/dev/null)" ] &&
        [ -n "$(ls "$W/$h.stalls" 2>/dev/null)" ] && grep -q "ERROR: libFuzzer: timeout" "$W/$h.log" &&
        ! grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)\|runtime error:\|deadly signal" "$W/$h.log"; then
        rc=0
    fi
    if [ "$rc" -ne 0 ] || [ -n "$(ls "$W/$h.artifacts" 2>/dev/null)" ] ||
        grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)\|runtime error:" "$W/$h.log"; then
        echo "FAILED (exit $rc)"
    elif [ -n "$(ls "$W/$h.stalls" 2>/dev/null)" ]; then
        echo "ok ($(ls "$W/$h.stalls" | wc -l) slow unit(s) replayed fast: stalls)"
    else
        echo ok
    fi
}

# The triage on planted artifacts, without clang: a stand-in harness that
# sleeps 3 s on an input saying "slow" and passes at once on any other.
# A slow unit that replays fast is no finding; one that is slow again is;
# a crash is one at once, without a replay.
if [ "$SELF_TEST" = 1 ]; then
    W=$(mktemp -d /tmp/cloze-fuzz-triage-XXXXXX)
    trap 'rm -rf "$W"' EXIT
    BUILD=$W/bin SLOW_S=2 REPLAYS=2
    mkdir -p "$BUILD"
    printf '#!/bin/sh\nfor a; do case $a in -*) ;; *) grep -q slow "$a" && sleep 3 ;; esac; done\nexit 0\n' \
        >"$BUILD/fuzz_stand_in"
    chmod +x "$BUILD/fuzz_stand_in"
    bad=0
    # check CASE WANT ARTIFACTS...: plants NAME=CONTENT artifacts, triages, compares
    check() {
        local what=$1 want=$2 h=fuzz_stand_in got
        shift 2
        rm -rf "$W/$h".*
        mkdir -p "$W/$h.artifacts"
        echo "0 5" >"$W/$h.rc"
        : >"$W/$h.log"
        for a; do printf '%s' "${a#*=}" >"$W/$h.artifacts/${a%%=*}"; done
        triage "$h"
        got=$(verdict "$h")
        case $got in
        "$want"*) echo "fuzz triage: $what: $got" ;;
        *) echo "FAIL: fuzz triage: $what: got '$got', want '$want'"; cat "$W/$h.triage" 2>/dev/null; bad=1 ;;
        esac
    }
    check "a slow unit that replays fast (a stall)" "ok (1 slow unit" slow-unit-1=fast
    check "a slow unit that is slow again" "FAILED" slow-unit-2=slow
    check "a crash (no replay)" "FAILED" crash-3=fast
    check "a stall beside a crash" "FAILED" slow-unit-4=fast crash-5=fast
    # a timeout that replays fast ended the run early: no failure
    h=fuzz_stand_in; rm -rf "$W/$h".*; mkdir -p "$W/$h.artifacts"; echo "70 5" >"$W/$h.rc"
    echo "==1== ERROR: libFuzzer: timeout after 11 seconds" >"$W/$h.log"
    printf fast >"$W/$h.artifacts/timeout-6"
    triage "$h"
    case $(verdict "$h") in
    ok*) echo "fuzz triage: a timeout that replays fast: $(verdict "$h")" ;;
    *) echo "FAIL: fuzz triage: a timeout that replays fast: $(verdict "$h")"; bad=1 ;;
    esac
    [ $bad = 0 ] && echo "fuzz triage self-test: ok"
    exit $bad
fi

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
    # a kept folder's artifacts and stalls are an earlier run's: not this one's
    rm -rf "$W/$h.artifacts" "$W/$h.stalls" "$W/$h.triage" "$W/$h.replay.log"
    mkdir -p "$c" "$W/$h.tmp" "$W/$h.artifacts"
    # the seeds a kept corpus (--keep) lacks
    for s in "$SRC/tests/fuzz/seeds/$h"/*; do
        [ ! -f "$s" ] || [ -e "$c/${s##*/}" ] || cp "$s" "$c"/
    done
    local t0=$SECONDS rc=0
    env CLOZE_FUZZ_TMP="$W/$h.tmp" "${FUZZ_ENV[@]}" \
        "$BUILD/$h" -max_total_time="$TIME" -timeout="$SLOW_S" -report_slow_units="$SLOW_S" \
        -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$W/$h.artifacts/" "$c" \
        >"$W/$h.log" 2>&1 || rc=$?
    echo "$rc $((SECONDS - t0))" >"$W/$h.rc"
    triage "$h"
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
    result=$(verdict "$h")
    [ "${result%% *}" = ok ] || fail=1
    printf '%-18s %8s %12s %10s %8s  %s\n' "$h" "$secs" "${execs:-?}" \
        "$([ -n "$execs" ] && [ "$secs" -gt 0 ] && echo $((execs / secs)) || echo ?)" "$corpus" "$result"
done
for h in "${HARNESSES[@]}"; do
    sed "s/^/fuzz: $h: /" "$W/$h.triage" >&2
    if [ "$(verdict "$h" | cut -d' ' -f1)" != ok ]; then
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
