#!/usr/bin/env bash
# cloze-prep shards when nothing is left (issue 46): inputs whose every line
# the passage rule drops (--passages on: headings, a WikiExtractor JSON line
# without a full stop) end in one line that says the rule dropped them, how
# many lines, and from which inputs, on 1 rank and on 2 (said once), and no
# progress line before it; inputs with no text at all say so, naming them.
# It was "no document in any shard: the inputs hold no text", naming neither
# the files nor the rule, after a progress line.
#   test_prep_no_passage.sh CLOZE_PREP
set -euo pipefail
P=${1:?usage: test_prep_no_passage.sh CLOZE_PREP}
SRC=${CLOZE_SOURCE_DIR:?run through ctest}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1
T=$(mktemp -d /tmp/cloze-prep-no-passage-XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
V=$SRC/tests/golden/cased_vocab.txt
printf 'History\nEarly life.\nSee also\n' >"$T/headings.txt"
printf '{"id": "7", "revid": "1", "url": "u", "title": "T", "text": "Some words without any final stop"}\n' \
  >"$T/nostop.json"
: >"$T/empty.txt"
run() { # run NAME RANKS ARGS...: exit status in rc, stderr in $T/NAME.err
  local name=$1 n=$2
  shift 2
  rc=0
  if [ "$n" = 1 ]; then
    "$P" shards --vocab "$V" --out "$T/out-$name" --shards 2 "$@" 2>"$T/$name.err" || rc=$?
  else
    timeout 120 mpirun --oversubscribe -np "$n" "$P" shards --vocab "$V" --out "$T/out-$name" \
      --shards 2 "$@" 2>"$T/$name.err" || rc=$?
    # the program's lines (not Open MPI's exit banner)
    grep "^cloze-prep" "$T/$name.err" >"$T/$name.tmp" || true
    mv "$T/$name.tmp" "$T/$name.err"
  fi
}
for n in 1 2; do
  run rule-$n $n --passages on "$T/headings.txt" "$T/nostop.json"
  [ "$rc" -ne 0 ] || fail "$n rank(s): nothing kept, exit 0"
  err=$T/rule-$n.err
  [ "$(grep -c '' "$err")" -eq 1 ] || fail "$n rank(s): want one line, got: $(cat "$err")"
  grep -q "passage rule (--passages on.*dropped all 4 lines of the inputs: $T/headings.txt, $T/nostop.json (2 files)" \
    "$err" || fail "$n rank(s): the line does not name the rule, the count and the inputs: $(cat "$err")"
done
run empty 1 "$T/empty.txt"
[ "$rc" -ne 0 ] && [ "$(grep -c '' "$T/empty.err")" -eq 1 ] &&
  grep -q "the inputs hold no text: $T/empty.txt" "$T/empty.err" ||
  fail "an empty input: want one line naming it, got (exit $rc): $(cat "$T/empty.err")"
[ "$fails" -eq 0 ] || exit 1
echo "ok: nothing kept is said in one line naming the rule, the dropped lines and the inputs"
