# Sourced by the bench scripts that train on a small real corpus.
# bench_corpus BUILD_DIR SRC_DIR WORK_DIR writes two training shards and a
# held-out one under WORK_DIR/shards and prints the train manifest's path:
# WikiText-2 + Gutenberg with BERT's vocabulary where ../shared/data sits
# beside the checkout, else the default corpus with an 8,000-token WordPiece
# vocabulary trained on it (a user's fresh clone).
bench_corpus() {
  local bin=$1 src=$2 work=$3
  local shared=$src/../shared/data
  if [ -f "$shared/vocab/bert-base-uncased/vocab.txt" ]; then
    "$bin/cloze-prep" shards --vocab "$shared/vocab/bert-base-uncased/vocab.txt" --out "$work/shards" \
      --shards 2 --heldout 0.015 --wikitext-detok --quiet "$shared/corpus/wikitext-2-raw" "$shared/corpus/gutenberg" >&2 || return
  else
    "$src/launch/default-corpus.sh" "$work/corpus.txt" >&2 || return
    "$bin/cloze-prep" vocab --kind wordpiece --size 8000 --out "$work/vocab.txt" "$work/corpus.txt" >&2 || return
    "$bin/cloze-prep" shards --vocab "$work/vocab.txt" --out "$work/shards" --shards 2 --heldout 0.02 \
      --quiet "$work/corpus.txt" >&2 || return
  fi
  echo "$work/shards/train.manifest"
}
