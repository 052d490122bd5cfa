# Sourced by the bench scripts that train on a simulated cluster
# (launch/cloze-netsim): needs $NETSIM, $BUILD, $SRC and $manifest (empty:
# bench_corpus's shards).
# netsim_bench_begin TOOL WORK_TAG NAME_PREFIX: exits 2 where namespaces
# cannot be made; sets $work (removed on exit unless $keep_work is 1: then
# its path is printed), $name (the cluster, torn
# down on exit), $manifest and $vocab_size, and prints the date, the commit
# and the machine (CPU, cores, load average) as '#' lines.
source "$(dirname "${BASH_SOURCE[0]}")/bench_corpus.sh"
netsim_bench_begin() {
  local tool=$1 tag=$2 prefix=$3 why hyp
  if ! why=$("$NETSIM" check); then echo "$tool: $why" >&2; exit 2; fi
  work=$(mktemp -d "/tmp/cloze-netsim-$tag-XXXXXX")
  name="$prefix$$"
  name=${name:0:8}
  trap '"$NETSIM" --name "$name" down >/dev/null 2>&1 || true
    if [ "${keep_work:-0}" = 1 ]; then echo "# kept $work" >&2; else rm -rf "$work"; fi' EXIT
  trap 'exit 130' INT TERM
  [ -n "$manifest" ] || manifest=$(bench_corpus "$BUILD" "$SRC" "$work")
  vocab_size=$(awk '$1 == "vocab" { print $3 }' "$manifest")
  hyp=$(lscpu | sed -n 's/^Hypervisor vendor: *//p')
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), cloze $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# CPU: $(netsim_bench_cpu 'Model name') (family $(netsim_bench_cpu 'CPU family') model $(netsim_bench_cpu Model)${hyp:+, $hyp guest}), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
netsim_bench_cpu() { lscpu | sed -n "s/^$1: *//p" | sed -n 1p; }
