# Shared by the training tests: a small real corpus (the Python tutorial from
# python3.11-doc, which the set-up installs), a learned vocabulary and shards,
# built once per build directory and reused.
set -euo pipefail
: "${CLOZE_BUILD_DIR:?run through ctest}" "${CLOZE_SOURCE_DIR:?run through ctest}"
BIN=$CLOZE_BUILD_DIR
SRC=$CLOZE_SOURCE_DIR
PY=${CLOZE_PYTHON:-python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# tests run several ranks on 2 cores: never let ranks spin while they wait
export OMPI_MCA_mpi_yield_when_idle=1

# prepare_corpus DIR: DIR/vocab.txt, DIR/shards/{train,heldout}.manifest
# corpus_stale DIR: whether DIR's shards are missing or older than what makes
# them (a build folder reused after cloze-prep or the corpus script changed
# must not test with the shards of the old code)
corpus_stale() {
  local f
  [ -s "$1/shards/train.manifest" ] || return 0
  for f in "$BIN/cloze-prep" "$SRC/launch/default-corpus.sh"; do
    [ "$1/shards/train.manifest" -nt "$f" ] || return 0
  done
  return 1
}
prepare_corpus() {
  local dir=$1
  corpus_stale "$dir" || return 0
  local docs=/usr/share/doc/python3.11/html/_sources
  if [ ! -d "$docs/tutorial" ]; then
    echo "SKIP: $docs/tutorial absent (install python3.11-doc)"; exit 77
  fi
  mkdir -p "$dir"
  local lock=$dir/.lock
  exec 9>"$lock"
  flock 9
  if corpus_stale "$dir"; then
    rm -rf "$dir/shards"
    "$SRC/launch/default-corpus.sh" "$dir/corpus.txt" "$docs/tutorial" 2>/dev/null
    "$BIN/cloze-prep" vocab --kind wordpiece --size 2000 --out "$dir/vocab.txt" "$dir/corpus.txt" >/dev/null 2>&1
    "$BIN/cloze-prep" shards --vocab "$dir/vocab.txt" --out "$dir/shards" --shards 2 --heldout 0.1 \
      "$dir/corpus.txt" >/dev/null 2>&1
  fi
  flock -u 9
}

# tiny_args DIR RUN_DIR: the small BERT used by the training tests
tiny_args() {
  local dir=$1 run=$2
  echo "$SRC/conf/bert-tiny.cfg" \
    --set model.vocab_size=$(grep -c '' "$dir/vocab.txt") \
    --set model.hidden=32 --set model.heads=2 --set model.layers=2 --set model.intermediate=64 \
    --set data.train_manifest="$dir/shards/train.manifest" \
    --set data.seq=32 --set data.max_pred=5 \
    --set train.run_dir="$run" --set train.threads=1 --set train.log_every=1 \
    --set train.eval_every=0 --set train.peak_gflops=10 --set optim.lr=1e-3 \
    --set optim.warmup_fraction=0 --set optim.warmup_steps=3 --quiet
}

# learn_bpe CORPUS DIR: a 600-token byte-level BPE vocabulary learned from
# CORPUS into DIR/encoder.json and DIR/vocab.bpe (the GPT tests' vocabulary)
learn_bpe() {
  "$BIN/cloze-prep" vocab --kind bpe --size 600 --out "$2/encoder.json" \
    --merges-out "$2/vocab.bpe" "$1" >/dev/null 2>&1
}

# bpe_shards CORPUS DIR: learn_bpe, then DIR/shards/{train,heldout}.manifest
# (2 shards, a tenth held out); prints the vocabulary's size
bpe_shards() {
  learn_bpe "$1" "$2"
  "$BIN/cloze-prep" shards --vocab "$2/encoder.json" --merges "$2/vocab.bpe" \
    --out "$2/shards" --shards 2 --heldout 0.1 --quiet "$1"
  awk '$1 == "vocab" { print $3 }' "$2/shards/train.manifest"
}

mpi() { local n=$1; shift; mpirun --oversubscribe -np "$n" "$@"; }
