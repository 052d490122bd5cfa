#!/usr/bin/env bash
# The aarch64 step of CI: cloze cross-built for 64-bit Arm with Debian's
# gcc-aarch64-linux-gnu, and its unit tests run under qemu-aarch64 user
# emulation. The kernels take their portable copy there (NEON through the
# compiler, src/kernels/vec.h); BLIS, Open MPI, LZ4, libconfig and utf8proc
# are Debian's arm64 packages, unpacked into a root of their own
# ($out/root) rather than installed, so the machine's amd64 packages are
# never touched (only `dpkg --add-architecture arm64`, which lets apt
# download them).
#
# usage: tests/aarch64/run.sh [ctest args...]   (env CLOZE_ARM_BUILD: the
#        folder, default build-aarch64/ in the checkout)
# Skips (exit 0, with the reason) when the cross tools or the arm64
# packages cannot be had; fails when a test fails.
#
# Not run under emulation, and why:
#   test_ckpt          starts the cloze-ckpt program through /bin/sh; the
#                      host's shell cannot exec an arm64 program without a
#                      binfmt_misc registration, which containers lack
#   test_gemm_default, test_gemm_avx512
#                      the x86 BLIS kernel-choice modes (test_gemm, AUTO,
#                      runs); BLIS's portable kernels under emulation take
#                      75 s each for nothing Arm-specific
#   label mpi          mpirun would have to start arm64 processes (binfmt
#                      again); the optimizer's copies are one on Arm (the
#                      baseline), which test_optim checks against its rule
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${CLOZE_ARM_BUILD:-$here/build-aarch64}
jobs=$(getconf _NPROCESSORS_ONLN)
skip() {
    echo "aarch64: SKIPPED: $*" >&2
    exit 0
}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo -n"

# ---- the cross compiler and the emulator (Debian packages) ----
tools=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
for p in "${tools[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "aarch64: installing ${missing[*]}" >&2
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null; } ||
        skip "could not install ${missing[*]} (apt-get as root is needed)"
fi

# ---- the arm64 libraries, unpacked into $out/root ----
# runtime libraries with everything they depend on, plus the -dev packages
# (headers, .so links) without theirs (compilers, mpirun)
runtime=(libopenmpi3 libblis4-openmp liblz4-1 libconfig9 libutf8proc2 libgomp1 zlib1g)
dev=(libopenmpi-dev libblis-dev libblis-openmp-dev liblz4-dev libconfig-dev libutf8proc-dev
     zlib1g-dev)
root=$out/root
# The root is reused while it holds what this script would unpack now: its
# stamp names the packages and the versions apt offers (so a changed list or
# an updated package unpacks afresh), and $root/.cloze-files lists every
# file it unpacked (so a root partly removed or edited is not trusted).
stamp=$root/.cloze-packages
want="${runtime[*]} ${dev[*]}"
closure() {
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "${runtime[@]/%/:arm64}" 2>/dev/null |
        grep -v '^ ' | grep ':arm64$' | sort -u
}
# versions PKG...: "pkg=candidate" per package, as apt would download them
versions() {
    apt-cache policy "$@" 2>/dev/null | awk '/^[^ ]/ { p = $1 } /Candidate:/ { print p "=" $2 }' |
        sed 's/:$//' | sort
}
root_files() { (cd "$root" && find . ! -name .cloze-files ! -name .cloze-packages ! -type d | sort); }
stale=""
if [ ! -f "$stamp" ] || [ ! -f "$root/.cloze-files" ]; then
    stale="no complete root yet"
elif [ "$(sed -n 1p "$stamp")" != "$want" ]; then
    stale="the package list changed"
elif ! root_files | cmp -s - "$root/.cloze-files"; then
    stale="files of the root are missing or were added"
elif dpkg --print-foreign-architectures | grep -qx arm64 && pkgs=$(closure) &&
    grep -qx 'libopenmpi3:arm64' <<<"$pkgs" &&
    [ "$(versions $pkgs "${dev[@]/%/:arm64}")" != "$(sed 1d "$stamp")" ]; then
    stale="apt offers other versions"
fi
if [ -n "$stale" ]; then
    echo "aarch64: unpacking the arm64 packages into $root ($stale)" >&2
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $sudo dpkg --add-architecture arm64 || skip "cannot add the arm64 architecture to dpkg"
        $sudo apt-get update -qq || skip "apt-get update failed"
    fi
    pkgs=$(closure || true)
    if ! grep -qx 'libopenmpi3:arm64' <<<"$pkgs"; then # package lists without arm64 yet
        $sudo apt-get update -qq || skip "apt-get update failed"
        pkgs=$(closure || true)
    fi
    grep -qx 'libopenmpi3:arm64' <<<"$pkgs" || skip "no arm64 packages in the apt sources"
    rm -rf "$out/debs" "$root"
    mkdir -p "$out/debs" "$root"
    # apt-get download runs as _apt where it can; a root-owned folder is fine
    (cd "$out/debs" && apt-get download $pkgs "${dev[@]/%/:arm64}" >/dev/null 2>"$out/debs.log") ||
        skip "could not download the arm64 packages (see $out/debs.log)"
    for d in "$out"/debs/*.deb; do dpkg-deb -x "$d" "$root"; done
    rm -rf "$out/debs"
    root_files >"$root/.cloze-files"
    # written last: an interrupted unpack leaves no stamp, and the next run
    # starts again
    { echo "$want"; versions $pkgs "${dev[@]/%/:arm64}"; } >"$stamp"
else
    echo "aarch64: reusing the arm64 packages in $root (same packages, versions and files)" >&2
fi

# ---- build and test ----
export CLOZE_ARM_ROOT=$root
echo "aarch64: building in $out/build (aarch64-linux-gnu-gcc, packages in $root)" >&2
cmake -S "$here" -B "$out/build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$here/tests/aarch64/toolchain.cmake" >"$out/cmake.log" 2>&1 ||
    { tail -20 "$out/cmake.log" >&2; exit 1; }
cmake --build "$out/build" -j"$jobs" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log" >&2; exit 1; }
echo "aarch64: unit tests under $(qemu-aarch64 --version | sed -n 1p)" >&2
ctest --test-dir "$out/build" --output-on-failure -j"$jobs" --timeout 300 -L unit -LE slow \
    -E '^(test_ckpt|test_gemm_default|test_gemm_avx512)$' "$@"
