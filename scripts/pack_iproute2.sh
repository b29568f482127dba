#!/bin/bash
# Packs this machine's Debian iproute2 (ip, tc, their tc modules and the libraries they
# load) into a git-ignored folder, as real files, for a host that has no ip/tc and no apt
# (the GPU test host): carry the folder there and scripts/gpu_check.sh puts it on PATH.
#   scripts/pack_iproute2.sh [FOLDER]      (default .gpu-tools/iproute2)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-tools/iproute2}
packages="iproute2 libbpf1 libbsd0 libelf1 libmd0 libmnl0 libxtables12"
for p in $packages; do
  dpkg -s "$p" > /dev/null 2>&1 || { echo "pack_iproute2: package $p is not installed here (apt-get install $p)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/tc"
for f in $(dpkg -L $packages); do
  [ -f "$f" ] || continue
  case "$f" in
    */bin/*|*/sbin/*) cp -L "$f" "$out/bin/" ;;
    */tc/*.so) cp -L "$f" "$out/lib/tc/" ;;
    *.so|*.so.*) cp -L "$f" "$out/lib/" ;;
  esac
done
echo "packed $(ls "$out/bin" | wc -l) programs and $(ls "$out/lib" | wc -l) libraries into $out"
