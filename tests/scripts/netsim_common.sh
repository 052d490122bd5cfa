# Shared by the simulated-cluster tests (launch/cloze-netsim): skips (77)
# where namespaces cannot be made; $work, a cluster name $name (NAME_PREFIX
# + pid, 8 characters) torn down on exit, and the training corpus in $data.
# usage: NAME_PREFIX=czt source netsim_common.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"
NETSIM=$SRC/launch/cloze-netsim
if ! why=$("$NETSIM" check); then echo "SKIP: cannot build a simulated cluster here: $why"; exit 77; fi
work=$(mktemp -d "/tmp/cloze-netsim-${NAME_PREFIX:?}-XXXXXX")
name="$NAME_PREFIX$$"
name=${name:0:8}
cleanup() { "$NETSIM" --name "$name" down >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
data=$CLOZE_BUILD_DIR/test-data/tutorial
prepare_corpus "$data"
