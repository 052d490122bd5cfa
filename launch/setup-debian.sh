#!/usr/bin/env bash
# Installs what cloze needs on Debian 12 (only the missing packages) and
# builds it into build/ (Release) — idempotent, so every entry point calls it.
#
# usage: launch/setup-debian.sh [-h|--help]
#   no arguments: install the packages of launch/debian-packages.txt that are
#   missing (apt-get, through sudo unless root), then cmake and build build/
set -euo pipefail
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup: unknown argument $1 (it takes none; try --help)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
mapfile -t pkgs < <(grep -v '^\s*#' launch/debian-packages.txt | grep -v '^\s*$')
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(getconf _NPROCESSORS_ONLN)" >/dev/null
echo "setup: built $(ls build | grep -c '^cloze-') programs in build/" >&2
