#!/usr/bin/env bash
# One entry point for a fresh machine: installs what is missing, configures, builds, then
#   ./run.sh train [poseidon train flags...]   distributed training (4 workers, fcnet, Fashion-MNIST)
#   ./run.sh test  [ctest flags...]            the whole test suite: ctest, then (without
#                                              flags) the sanitizer step, scripts/sanitize.sh
#   ./run.sh sanitize [thread|address]         just the sanitizer step
#   ./run.sh build                             just install and build
# Environment: RANKS (default 4) for `train`, BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")"

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  train|test|sanitize|build) ;;
  *) echo "usage: ./run.sh train|test|sanitize|build [args...]" >&2; exit 2 ;;
esac

scripts/setup.sh
build=${BUILD_DIR:-build}

# mpirun refuses root unless told; ranks beyond the core count need --oversubscribe, and
# each rank keeps to its own threads so ranks do not fight over cores.
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

case "$cmd" in
  build) ;;
  train)
    ranks=${RANKS:-4}
    args=("$@")
    [ ${#args[@]} -eq 0 ] && args=(--model fcnet --epochs 1)
    exec mpirun -np "$ranks" --oversubscribe "$build/apps/poseidon" train "${args[@]}"
    ;;
  test)
    (cd "$build" && ctest --output-on-failure --timeout 600 "$@")
    # A chosen subset (ctest flags) is just that; the whole suite ends with the sanitizers.
    if [ $# -eq 0 ]; then exec scripts/sanitize.sh; fi
    ;;
  sanitize)
    exec scripts/sanitize.sh "$@"
    ;;
esac
