# What the venv makers of the tests (hf_venv.sh, wikiextractor_venv.sh, tb_venv.sh)
# share, sourced by them: made once per directory, reused through a stamp
# file, a lock for makers that run in parallel, pip's output kept in
# DIR/pip.log, and exit 77 (skipped) with a reason when the venv cannot be
# made.

skip() { echo "skip: $*" >&2; exit 77; }

# venv_done DIR STAMP PRINT: when DIR is made (its stamp and bin/python),
# prints PRINT and exits 0.
venv_done() {
  if [ -f "$2" ] && [ -x "$1/bin/python" ]; then
    echo "$3"
    exit 0
  fi
}

# venv_once DIR STAMP PRINT: venv_done, else take DIR's lock and look
# again; returns, holding the lock, when DIR is to be made. Tests that share
# DIR run in parallel (ctest -j): the first makes it while the others wait
# on the lock, then find the stamp. Without the lock two makers removed each
# other's half-built venv (CI, a clean clone).
venv_once() {
  venv_done "$@"
  mkdir -p "$(dirname "$1")"
  exec 9>"$1.lock"
  flock 9
  venv_done "$@"
}

# venv_pip DIR WHAT PIP-ARGS...: pip install into DIR's venv; on failure
# shows pip's last lines and skips, saying it could not install WHAT.
venv_pip() {
  local dir=$1 what=$2
  shift 2
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
  if ! "$dir/bin/python" -m pip install -q "$@" >>"$dir/pip.log" 2>&1; then
    tail -3 "$dir/pip.log" >&2 || true
    skip "pip could not install $what"
  fi
}
