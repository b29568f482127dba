#!/usr/bin/env bash
# Installs the Debian packages Poseidon needs (only those missing), then configures and
# builds into ${BUILD_DIR:-build}. Safe to run again: it does only what is left to do.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libopenblas0-pthread          # LibTorch 1.13 (CPU) and a fast BLAS for it
  libblas-dev                                # cblas.h for the SFB reconstruction GEMM
  libopenmpi-dev openmpi-bin                 # the transport and the launcher
  dataset-fashion-mnist                      # the real data, as IDX files
  libcli11-dev nlohmann-json3-dev zlib1g-dev libgtest-dev
  python3 python3-numpy                      # the end-to-end test driver
  python3-dev pybind11-dev                   # the Python package's extension (poseidon._C)
  python3-torch python3-torchvision          # PyTorch users' side: the package, its examples
  python3-pytest python3-pip python3-setuptools  # the Python package's tests (pip install . too)
  clang libclang-rt-14-dev                   # libFuzzer and sanitizers for the decoding fuzz test
  iproute2 util-linux                        # ip/tc for the bandwidth lab, setpriv for its tests
  python3-matplotlib                         # the benchmarks' plots (docs/benchmarks/*.png)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build=${BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
# Two jobs: each LibTorch translation unit needs ~1 GB and ~20 s.
cmake --build "$build" -j 2
