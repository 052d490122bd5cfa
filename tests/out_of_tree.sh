#!/usr/bin/env bash
# A build directory outside the checkout, then an install to a prefix with
# no source tree left (CI runs this after the suite; docs/user-guide.md,
# "Build directories and installs"):
#   1. a copy of the checkout is configured and built in a directory beside
#      neither, and the sweep tests (the programs that find launch scripts:
#      cloze-sweep finds cloze-mpirun and cloze.sbatch) run there;
#   2. `cmake --install` to a prefix, the source copy and the build
#      directory removed, and the installed cloze-sweep runs a one-point
#      sweep: it can only have found cloze-train beside itself and
#      cloze-mpirun in PREFIX/share/cloze/launch, the base configuration in
#      PREFIX/share/cloze/conf.
#
#   tests/out_of_tree.sh [JOBS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-$(getconf _NPROCESSORS_ONLN)}
tmp=$(mktemp -d /tmp/cloze-oot-XXXXXX)
trap '${CLOZE_KEEP_WORK:+:} rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1

# ---- 1. build elsewhere, the sweep tests there
# The copy holds the project's files only, as a fresh clone would, whatever
# earlier runs left in the checkout (build*/, runs/, the aarch64 sysroot):
# in a git checkout (a worktree too) its commit, the uncommitted changes and
# the new files git does not ignore; elsewhere (a release tarball) every file
# but those .gitignore names (its /top-level patterns and the others).
copy_tarball() {
  local pat name anchored=() excl=() top=()
  while IFS= read -r pat; do
    case $pat in '' | '#'* | '!'*) continue ;; esac
    pat=${pat%/}
    if [[ $pat == /* ]]; then anchored+=("${pat#/}"); else excl+=(--exclude="$pat"); fi
  done < <(cat "$here/.gitignore" 2>/dev/null || true)
  for name in "$here"/* "$here"/.[!.]*; do
    [ -e "$name" ] || continue
    name=${name##*/}
    for pat in "${anchored[@]}"; do [[ $name == $pat ]] && continue 2; done
    top+=("$name")
  done
  mkdir -p "$tmp/src"
  tar -C "$here" "${excl[@]}" -cf - "${top[@]}" | tar -C "$tmp/src" -xf -
}
if [ "$(git -C "$here" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$here" && pwd -P)" ]; then
  git clone -q --no-hardlinks "$here" "$tmp/src"
  # uncommitted changes of a developer's checkout come along, and new files
  git -C "$here" diff --binary HEAD | git -C "$tmp/src" apply --allow-empty ||
    { echo "FAIL: the checkout's uncommitted changes do not apply to a clone of HEAD"; exit 1; }
  git -C "$here" ls-files -z --others --exclude-standard |
    tar -C "$here" --null -T - -cf - | tar -C "$tmp/src" -xf -
else
  copy_tarball
fi
cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
# the programs are what the sweep tests and the install need (the install
# copies every program), and the sweep's unit test (test_sweep_csv) is one
# of the tests
cmake --build "$tmp/build" -j"$jobs" --target cloze-train cloze-finetune cloze-sweep cloze-ckpt \
  cloze-prep cloze-plan cloze-generate test_sweep_csv >/dev/null
ctest --test-dir "$tmp/build" --output-on-failure -j"$jobs" -R '^test_sweep'

# ---- 2. install, remove the sources and the build, sweep from the prefix
prefix=$tmp/prefix
cmake --install "$tmp/build" --prefix "$prefix" >/dev/null
data=$tmp/data
mkdir -p "$data"
cp "$tmp/build/test-data/tutorial/corpus.txt" "$data/"
rm -rf "$tmp/src" "$tmp/build"
bin=$prefix/bin
"$bin/cloze-prep" vocab --kind wordpiece --size 2000 --out "$data/vocab.txt" "$data/corpus.txt" \
  >/dev/null 2>&1
"$bin/cloze-prep" shards --vocab "$data/vocab.txt" --out "$data/shards" --shards 2 --heldout 0.1 \
  --quiet "$data/corpus.txt"
cat >"$tmp/one.cfg" <<EOF
sweep:
{
  name = "one";
  base = "$prefix/share/cloze/conf/bert-tiny.cfg";
  set = [ "data.seq=32", "data.max_pred=5", "train.global_batch=4", "train.micro_batch=2",
          "train.log_every=100", "train.peak_gflops=10", "model.hidden=32", "model.heads=2",
          "model.intermediate=64", "optim.warmup_steps=0", "optim.warmup_fraction=0.1" ];
  axes = ( { key = "model.layers"; values = [1]; } );
  budget = { flops = [1e10]; };
  eval = { batches = 4; };
  ranks = 2;
  threads = 1;
};
EOF
"$bin/cloze-sweep" run "$tmp/one.cfg" --dir "$tmp/sweep" --quiet \
  --set "model.vocab_size=$(grep -c '' "$data/vocab.txt")" \
  --set "data.train_manifest=$data/shards/train.manifest" \
  --set "data.heldout_manifest=$data/shards/heldout.manifest" >"$tmp/sweep.out" 2>&1 ||
  { cat "$tmp/sweep.out"; echo "FAIL: the installed cloze-sweep could not run a point"; exit 1; }
grep -q ',done,' "$tmp/sweep/results.csv" ||
  { cat "$tmp/sweep.out" "$tmp/sweep/results.csv"; echo "FAIL: the point did not finish"; exit 1; }
echo "out of tree: the sweep tests passed from a build directory outside the checkout; the installed cloze-sweep ran a point with the sources gone"
