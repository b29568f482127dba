#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/custom_module.cc as an outside
# project with find_package(Poseidon), runs it on 2 ranks and checks that its loss fell.
#   tests/package/check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
cmake -S "$src/tests/package" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DPOSEIDON_EXAMPLE="$src/examples/custom_module.cc" > "$tmp/configure.log" \
  || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/consumer" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
out=$(mpirun -np 2 --oversubscribe "$tmp/consumer/custom_module")
echo "$out" | tail -3
# "test loss before B after A": the example trained.
echo "$out" | awk '/test loss before/ { ok = ($6 < 0.5 * $4) } END { exit ok ? 0 : 1 }' \
  || { echo "the installed-package build did not train (loss did not fall by half)"; exit 1; }
