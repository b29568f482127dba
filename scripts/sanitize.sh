#!/usr/bin/env bash
# The sanitizer step of the test suite (./run.sh test runs it after ctest; ./run.sh sanitize
# alone). Builds Poseidon's core without LibTorch (LibTorch and OpenMPI are not built with
# sanitizers; the core is where our threads live) once with ThreadSanitizer and once with
# AddressSanitizer + UndefinedBehaviorSanitizer, and runs under each:
#   - the threads-as-ranks suites and the checkpoint and decoding tests (ctest label unit),
#   - 2-rank mpirun runs: a whole session per scheme against its reference, and one with the
#     timeline recording and its trace written (label sanitize),
#     the three KVStore ordering designs under stress, and a session in which rank 1 fails
#     at each phase (POSEIDON_FAULT), so that its teardown runs under the sanitizer.
# Any report fails the step. Suppressions (scripts/sanitizers/*.supp) name third-party
# libraries only, each with its reason.
# Usage: scripts/sanitize.sh [thread|address]...   (default: both)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
supp="$root/scripts/sanitizers"
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(thread address)

if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# nproc obeys OMP_NUM_THREADS: read the core count before setting it to 1 per rank (with it
# set first, as run.sh exports it, the sanitizer builds ran on one core).
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# Reports go to stderr and also set the exit status: 66 for TSan, an abort for ASan/UBSan.
# ignore_noninstrumented_modules: memcpy and friends called from inside OpenMPI (not built
# with TSan) record no accesses. Without it, a collective's result written by whichever
# thread happened to drive MPI's progress (libnbc) and read by ours after MPI_Test saw it
# complete is reported: the hand-over is a flag inside OpenMPI that TSan cannot see, and
# the writer's stack cannot even be restored for a suppression to match.
export TSAN_OPTIONS="suppressions=$supp/tsan.supp second_deadlock_stack=1 exitcode=66 ignore_noninstrumented_modules=1"
# OpenMPI is built without frame pointers: the slow unwinder gives its leaks whole stacks,
# so the suppressions can see which library they come from.
export ASAN_OPTIONS="detect_leaks=1 fast_unwind_on_malloc=0 abort_on_error=0 exitcode=67"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"

run_kind() {
  # ASan+UBSan at -O0: UBSan's checks make the optimiser slow (one core file: 26.6 s at
  # -O1, 10.6 s at -O0). On the 2-core CI machine its build took 994 CPU-s at -O1 and 309
  # at -O0, its ctest run 61 s and 148 s (the simulator's scale case 21 s and 69 s of that).
  # TSan stays at -O2: at -O1 its build saved 21 CPU-s and its tests took 172 s, not 141.
  local kind=$1 flags opt
  case "$kind" in
    thread) flags="thread" opt="-O2" ;;
    address) flags="address;undefined" opt="-O0" ;;
    *) echo "sanitize.sh: unknown sanitizer '$kind' (thread or address)" >&2; exit 2 ;;
  esac
  local dir="${SANITIZE_BUILD_ROOT:-$root}/build-sanitize-$kind"
  echo "== sanitizer $flags: build in $dir"
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -G Ninja -DPOSEIDON_BUILD_TORCH=OFF "-DPOSEIDON_SANITIZE=$flags" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt -g -DNDEBUG" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$opt -g -DNDEBUG" > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
  cmake --build "$dir" -j "$cores" > "$dir/build.log" 2>&1 || { tail -n 60 "$dir/build.log"; exit 1; }
  tail -n 1 "$dir/build.log"
  echo "== sanitizer $flags: threads-as-ranks suites, checkpoint and decoding tests, session smoke runs"
  # Not the simulator's scale case (22 k layers on 256 nodes, one thread): the smaller
  # simulations run the same code, and under the sanitizers it took 47-69 s of the step.
  (cd "$dir" && GTEST_FILTER=-Simulate.Vgg19_22kAt256NodesCompletes \
     ctest --output-on-failure --no-tests=error --timeout 600 -L 'unit|sanitize')
  # 15 iterations (120 collectives) per design under both sanitizers: at 50, one design
  # took 31 s under ASan -O0.
  echo "== sanitizer $flags: the KVStore designs under stress, 2 ranks"
  for design in funnel concurrent chained; do
    mpirun -np 2 --oversubscribe "$dir/tests/kvstore_stress" --kvstore "$design" --iterations 15
  done
  echo "== sanitizer $flags: a failure injected on rank 1 at each phase, its teardown under the sanitizer"
  local phase scheme out
  for scheme in ps allreduce; do
    for phase in startup broadcast iteration finish; do
      if out=$(POSEIDON_FAULT="1:$phase:throw" mpirun -np 2 --oversubscribe "$dir/tests/session_smoke" \
                 --scheme "$scheme" 2>&1); then
        echo "$out"; echo "sanitize.sh: the run with a failure at $phase did not fail"; exit 1
      fi
      if grep -qE "Sanitizer|runtime error" <<<"$out" || ! grep -q "injected failure at phase $phase" <<<"$out"; then
        echo "$out"; echo "sanitize.sh: the failure at $phase did not end cleanly"; exit 1
      fi
      echo "  $scheme, $phase: rank 1 failed as injected and tore down cleanly"
    done
  done
  echo "== sanitizer $flags: zero reports"
}

for kind in "${kinds[@]}"; do run_kind "$kind"; done
