#!/usr/bin/env bash
# launch/cloze-mpirun turns a stop signal into a checkpoint and exit 0
# (issue 15, item 6): SIGTERM to the launcher mid-run ends the job with exit
# 0 (Open MPI's mpirun, which the launcher used to exec, aborts on SIGTERM
# and exits 1), leaves a checkpoint at the last step the run logged, and
# --resume auto continues with the losses of an uninterrupted run. Ctrl-C
# on a terminal (SIGINT to its whole foreground process group) does the
# same: mpirun, in a process group of its own, does not see it.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-launch-signals-XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
common() { tiny_args "$data" "$1"; echo --set train.global_batch=4 --set train.micro_batch=2; }
launch=("$SRC/launch/cloze-mpirun" -n 2 -t 1 "$BIN/cloze-train")
started() { # started RUN_DIR: a step logged
  for _ in $(seq 300); do grep -q '"loss"' "$1/metrics.jsonl" 2>/dev/null && return 0; sleep 0.1; done
  echo "FAIL: the run in $1 logged no step"; exit 1
}
last_step() { tail -n1 "$1/metrics.jsonl" | $PY -c 'import json,sys; print(json.load(sys.stdin)["step"])'; }

# 1. SIGTERM to the launcher. A long schedule, so that the signal lands mid-run.
"${launch[@]}" $(common "$work/term") --set train.steps=100000 2> "$work/term.log" &
pid=$!
started "$work/term"
sleep 0.5
kill -TERM $pid
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || { cat "$work/term.log"; echo "FAIL: SIGTERM to cloze-mpirun: exit $rc, want 0"; exit 1; }
grep -q "cloze-mpirun: SIGTERM: asking the ranks to write a checkpoint" "$work/term.log" ||
  { cat "$work/term.log"; echo "FAIL: no word from the launcher"; exit 1; }
last=$(last_step "$work/term")
ck=$(printf '%s/ckpt-%08d.lz4' "$work/term" "$last")
"$BIN/cloze-ckpt" verify "$ck" > /dev/null ||
  { ls "$work/term"; echo "FAIL: no good checkpoint at step $last, the last one logged"; exit 1; }
"${launch[@]}" $(common "$work/term") --set train.steps=100000 --resume auto \
  --set train.stop_after_steps=10 2> "$work/resume.log" || { cat "$work/resume.log"; exit 1; }
grep -q "resumed from $ck" "$work/resume.log" || { cat "$work/resume.log"; echo "FAIL: resumed from?"; exit 1; }
mpi 2 "$BIN/cloze-train" $(common "$work/ref") --set train.steps=100000 \
  --set train.stop_after_steps=$((last + 10))
$PY "$SRC/tests/scripts/compare_metrics.py" "$work/ref/metrics.jsonl" "$work/term/metrics.jsonl" --exact
[ "$(last_step "$work/term")" = $((last + 10)) ] || { echo "FAIL: the resumed run did not reach step $((last + 10))"; exit 1; }
echo "SIGTERM to cloze-mpirun: exit 0, checkpoint at step $last, exact resume: ok"

# 2. Ctrl-C on a terminal: the launcher in the foreground of a pseudo-terminal
$PY - "$work/int" "${launch[@]}" $(common "$work/int") --set train.steps=100000 <<'PY'
import os, pty, sys, time
run, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
out = b""
def drain(t):
    global out
    end = time.time() + t
    while time.time() < end:
        try:
            import select
            if select.select([fd], [], [], 0.05)[0]:
                out += os.read(fd, 65536)
        except OSError:
            # EIO once the terminal's other side has closed: keep the
            # caller's wait, else its 60 s loop would end at once
            time.sleep(max(0.0, end - time.time()))
            return
deadline = time.time() + 30
while time.time() < deadline:
    drain(0.1)
    try:
        if '"loss"' in open(os.path.join(run, "metrics.jsonl")).read():
            break
    except FileNotFoundError:
        pass
drain(0.5)
os.write(fd, b"\x03")  # the terminal's interrupt character: SIGINT to its foreground group
for _ in range(600):
    drain(0.1)
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
else:
    os.kill(pid, 9)
    sys.exit("FAIL: the launcher did not end after Ctrl-C\n" + out.decode(errors="replace"))
drain(0.2)
text = out.decode(errors="replace")
rc = os.waitstatus_to_exitcode(status)
if rc != 0 or "cloze-mpirun: SIGINT: asking the ranks" not in text:
    sys.exit(f"FAIL: Ctrl-C: exit {rc}, want 0 with the launcher's message\n{text}")
PY
last=$(last_step "$work/int")
"$BIN/cloze-ckpt" verify "$(printf '%s/ckpt-%08d.lz4' "$work/int" "$last")" > /dev/null ||
  { ls "$work/int"; echo "FAIL: Ctrl-C: no good checkpoint at step $last"; exit 1; }
echo "Ctrl-C on a terminal: exit 0, checkpoint at step $last: ok"

# 3. SIGUSR1 during start-up, before the run's loop exists: kept for the
# run (a checkpoint after its first step, exit 0), not fatal (SIGUSR1's
# default action ended the process, exit 138). The configuration is a FIFO,
# so the process is caught in start-up for sure: opening it blocks (the
# kernel's wait_for_partner) until the test has sent the signal and writes
# the file (once per open: the loader reads it more than once).
mkfifo "$work/cfg.fifo"
args=($(common "$work/early")); args[0]=$work/cfg.fifo
"$BIN/cloze-train" "${args[@]}" --set train.steps=50 2> "$work/early.log" &
pid=$!
for _ in $(seq 200); do
  [ "$(cat /proc/$pid/wchan 2>/dev/null)" = wait_for_partner ] && break; sleep 0.05
done
[ "$(cat /proc/$pid/wchan 2>/dev/null)" = wait_for_partner ] ||
  { kill $pid; echo "FAIL: cloze-train never waited on its configuration FIFO"; exit 1; }
kill -USR1 $pid
while kill -0 $pid 2>/dev/null; do
  timeout 5 cp "$SRC/conf/bert-tiny.cfg" "$work/cfg.fifo" 2>/dev/null || break
done
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || { cat "$work/early.log"; echo "FAIL: SIGUSR1 during start-up: exit $rc, want 0"; exit 1; }
grep -q "stop requested by signal: checkpoint at step 1 written" "$work/early.log" ||
  { cat "$work/early.log"; echo "FAIL: SIGUSR1 during start-up: no checkpoint after the first step"; exit 1; }
"$BIN/cloze-ckpt" verify "$(printf '%s/ckpt-%08d.lz4' "$work/early" 1)" > /dev/null ||
  { ls "$work/early"; echo "FAIL: SIGUSR1 during start-up: no good checkpoint at step 1"; exit 1; }
echo "SIGUSR1 during start-up: checkpoint after step 1, exit 0: ok"
echo "test_launch_signals: ok"
