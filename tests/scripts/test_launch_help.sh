#!/usr/bin/env bash
# Every launcher script in launch/ answers --help (and -h) with its usage on
# stdout and exit 0, doing nothing else: no file in the working directory
# (default-corpus.sh took --help for its output path and wrote
# "--help.tmp.PID" there), no package manager, build, mpirun or sbatch (the
# commands they call are stubs here that leave a mark: setup-debian.sh ran
# apt-get and the whole build for --help). Their usage is text, not the
# script (quickstart.sh printed its "set -euo pipefail"). An unknown option
# is one line on stderr and exit 2 (cloze.sbatch passes its options to
# cloze-train, whose errors test_train_rundir checks: it is given none).
set -euo pipefail
: "${CLOZE_SOURCE_DIR:?run through ctest}"
work=$(mktemp -d /tmp/cloze-launch-help-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/stubs" "$work/cwd"
for c in apt-get sudo cmake mpirun sbatch scontrol ip tc dpkg-query; do
  printf '#!/bin/sh\necho "stub %s called" >&2\ntouch "%s/called-%s"\nexit 97\n' \
    "$c" "$work" "$c" >"$work/stubs/$c"
  chmod +x "$work/stubs/$c"
done
export PATH=$work/stubs:$PATH
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run NAME ARGS...: in the empty directory, 20 s at most; sets rc, out, err
run() {
  local f=$1
  shift
  rc=0
  (cd "$work/cwd" && timeout 20 "$f" "$@") >"$work/out" 2>"$work/err" || rc=$?
  out=$(cat "$work/out")
  err=$(cat "$work/err")
}
# nothing_done NAME WHAT: no file in the working directory, no stub called
nothing_done() {
  local left
  left=$(ls -A "$work/cwd")
  [ -z "$left" ] || fail "$1 $2: created in the working directory: $left"
  rm -rf "${work:?}/cwd/"* "$work/cwd/".[!.]* 2>/dev/null
  for m in "$work"/called-*; do
    [ -e "$m" ] || continue
    fail "$1 $2: ran ${m##*/called-}"
    rm -f "$m"
  done
}

n=0
for f in "$CLOZE_SOURCE_DIR"/launch/*; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  name=${f##*/}
  n=$((n + 1))
  for h in --help -h; do
    run "$f" $h
    [ "$rc" -eq 0 ] || fail "$name $h: exit $rc: $err"
    grep -qi 'usage' <<<"$out" || fail "$name $h: no usage on stdout: $out"
    ! grep -qE '^(set -|#!|[a-z_]+=\$|case |esac)' <<<"$out" || fail "$name $h: prints shell code: $out"
    [ -z "$err" ] || fail "$name $h: wrote to stderr: $err"
    nothing_done "$name" "$h"
  done
  [ "$name" = cloze.sbatch ] && continue
  run "$f" --no-such-option
  [ "$rc" -eq 2 ] || fail "$name --no-such-option: exit $rc, expected 2: $err"
  [ "$(grep -c '' <<<"$err")" -eq 1 ] && grep -q -- '--no-such-option' <<<"$err" ||
    fail "$name --no-such-option: not one line naming it: $err"
  nothing_done "$name" --no-such-option
done
[ "$n" -ge 6 ] || fail "only $n launcher scripts found in $CLOZE_SOURCE_DIR/launch"

[ "$failures" -eq 0 ] || exit 1
echo "test_launch_help: $n launcher scripts: --help and -h print their usage and do nothing else"
