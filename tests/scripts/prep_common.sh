# Helpers of the cloze-prep test scripts (sourced after T, the scratch
# directory, is set): check, expect_error, shards_of. A failed check sets
# fail=1; the script exits with it.
set -euo pipefail
fail=0
check() { # check "what" command...
    local what=$1
    shift
    if ! "$@"; then
        echo "FAIL: $what"
        fail=1
        return 1
    fi
}
expect_error() { # expect_error "what" "fragment" command...: non-zero, one line naming it
    local what=$1 frag=$2
    shift 2
    if "$@" >"$T/out" 2>"$T/err"; then
        echo "FAIL: $what: exit 0"
        fail=1
        return
    fi
    if ! grep -q -- "$frag" "$T/err" || [ "$(grep -c . "$T/err")" -ne 1 ]; then
        echo "FAIL: $what: want one line with '$frag', got:"
        cat "$T/err"
        fail=1
    fi
}
# the shard files a manifest lists (they live in DIR/set-NNNN/)
shards_of() { awk -v d="$(dirname "$1")" '$1 == "shard" { print d "/" $2 }' "$1"; }
