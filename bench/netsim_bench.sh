# Sourced by the benches that train on simulated clusters (launch/cloze-netsim).
# netsim_setup SCRIPT TMP_PREFIX NAME_PREFIX, with BUILD, SRC, NETSIM and
# manifest ("" for the default corpus) set: exits 2 with the reason where
# namespaces cannot be made; sets $work (a directory removed on exit, with
# the cluster $name torn down), $manifest and its $vocab_size.
netsim_setup() {
  local script=$1 tmp=$2 why
  if ! why=$("$NETSIM" check); then echo "$script: $why" >&2; exit 2; fi
  work=$(mktemp -d "/tmp/$tmp-XXXXXX")
  name="$3$$"
  name=${name:0:8}
  trap '"$NETSIM" --name "$name" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  trap 'exit 130' INT TERM
  source "$SRC/bench/bench_corpus.sh"
  [ -n "$manifest" ] || manifest=$(bench_corpus "$BUILD" "$SRC" "$work")
  vocab_size=$(awk '$1 == "vocab" { print $3 }' "$manifest")
}
