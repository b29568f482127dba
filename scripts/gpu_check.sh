#!/bin/bash
# The GPU check: on a host with an NVIDIA GPU as the project's GPU test host stands (its own
# torch in a virtual environment, no apt, no network), configure and build, run the GPU
# tests, then the papers' benchmark on the GPU in the bandwidth lab; the table comes last.
#
#   scripts/gpu_check.sh            # tests, then the benchmark
#   scripts/gpu_check.sh tests      # build + GPU tests only (a few minutes)
#   scripts/gpu_check.sh bench      # build + benchmark only
#
# Settings (environment):
#   POSEIDON_PYTHON  the Python with torch (default /opt/torch/.venv/bin/python if it exists,
#                    else the project's .venv); nothing is installed with pip
#   BUILD_DIR        the build folder (default build-gpu)
#   IPROUTE          a folder with bin/ and lib/ of iproute2 (scripts/pack_iproute2.sh makes
#                    .gpu-tools/iproute2, the default); ip and tc from PATH otherwise. Without
#                    ip/tc, or without root, the benchmark is skipped with a message
#   GPU_BENCH_MODELS (vgg19,resnet50)  GPU_BENCH_RATES (10gbit,25gbit)
#   GPU_BENCH_ITERATIONS (8)           GPU_BENCH_REPEATS (1)
#   GPU_BENCH_SYSTEMS (ddp,ddp-fp16,ddp-powersgd,poseidon,poseidon-bf16,compute); add poseidon-sfb-host to
#                    measure SFB layers stepped on the host against on the GPU
#   GPU_BENCH_TIMEOUT (0: none)  seconds the whole benchmark may take; a run cut short still
#                    prints each system's figure as it came
#   GPU_TEST_JOBS (4)            GPU tests run at once (each is 2 ranks sharing the GPU)
#   GPU_CHECK_OUT    a folder for the logs and the benchmark's table (default: the build folder)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=${1:-all}
case "$what" in tests|bench|all) ;; *) echo "usage: scripts/gpu_check.sh [tests|bench|all]" >&2; exit 2 ;; esac

python=${POSEIDON_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x /opt/torch/.venv/bin/python ]; then python=/opt/torch/.venv/bin/python; else python=$root/.venv/bin/python; fi
fi
build=${BUILD_DIR:-build-gpu}
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: $python's torch sees no CUDA GPU; this check is for a GPU host" >&2
  exit 1
fi
"$python" -c 'import torch; print("gpu_check: torch", torch.__version__, "on", torch.cuda.get_device_name(0),
  "x", torch.cuda.device_count())'

logs=${GPU_CHECK_OUT:-$build}
mkdir -p "$logs"
start=$(date +%s)
# Only what the check runs: the CLI and the Python package (the GPU tests are Python jobs).
POSEIDON_PYTHON=$python POSEIDON_SKIP_APT=1 POSEIDON_BUILD_JOBS=${POSEIDON_BUILD_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)} BUILD_DIR=$build \
  POSEIDON_BUILD_TARGETS="poseidon poseidon_python" scripts/setup.sh
echo "gpu_check: built in $(( $(date +%s) - start )) s"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
tests_result="not run"
if [ "$what" != bench ]; then
  start=$(date +%s)
  tests_result="passed"
  # The CLI on the GPU: two ranks sharing it, a short synthetic run.
  timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$build/apps/poseidon" train --device cuda --model convnet \
    --synthetic --iterations 20 --no-eval 2>&1 | tee "$logs/gpu-cli.log" || tests_result="FAILED"
  # The Python example on the GPU, as a user runs it (once segfaulted in _C.Model).
  PYTHONPATH=$root/$build/python timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$python" \
    examples/python/train_torchvision.py --device cuda --model resnet18 --synthetic --iterations 20 --log-every 10 \
    2>&1 | tee "$logs/gpu-example.log" || tests_result="FAILED"
  (cd "$build" && ctest -L gpu -j "${GPU_TEST_JOBS:-4}" --output-on-failure --timeout 600) 2>&1 \
    | tee "$logs/gpu-ctest.log" || tests_result="FAILED"
  # On the GPU host a skipped gpu.* test means its check (tests/gpu/if_gpu.sh) missed the GPU.
  # (package.extension_runtime, also labelled gpu, may skip for want of nm: not counted.)
  if grep -qE " - gpu\.[^ ]* \(Skipped\)" "$logs/gpu-ctest.log"; then
    tests_result="FAILED"
    echo "gpu_check: a gpu.* test skipped on the GPU host: tests/gpu/if_gpu.sh did not see the GPU"
  fi
  echo "gpu_check: GPU tests $tests_result in $(( $(date +%s) - start )) s"
fi

bench_result="not run"
if [ "$what" != tests ]; then
  iproute=${IPROUTE:-$root/.gpu-tools/iproute2}
  if [ -d "$iproute/bin" ]; then
    export PATH=$iproute/bin:$PATH LD_LIBRARY_PATH=$iproute/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} TC_LIB_DIR=$iproute/lib/tc
  fi
  if [ "$(id -u)" != 0 ] || ! command -v ip > /dev/null || ! command -v tc > /dev/null; then
    bench_result="skipped: the lab needs root and ip/tc (scripts/pack_iproute2.sh on a Debian machine, then IPROUTE=...)"
  else
    start=$(date +%s)
    limit=()
    [ "${GPU_BENCH_TIMEOUT:-0}" != 0 ] && limit=(timeout "$GPU_BENCH_TIMEOUT")
    POSEIDON_PYTHON=$python PYTHONUNBUFFERED=1 "${limit[@]}" "$python" bench/papers/papers_models_vs_ddp.py \
      --device cuda --poseidon "$build/apps/poseidon" --out "$logs" \
      --models "${GPU_BENCH_MODELS:-vgg19,resnet50}" --bandwidths "${GPU_BENCH_RATES:-10gbit,25gbit}" \
      --iterations "${GPU_BENCH_ITERATIONS:-8}" --repeats "${GPU_BENCH_REPEATS:-1}" \
      --systems "${GPU_BENCH_SYSTEMS:-ddp,ddp-fp16,ddp-powersgd,poseidon,poseidon-bf16,compute}" 2>&1 | tee "$logs/gpu-bench.log" \
      && bench_result="done" || bench_result="cut short or failed"
    bench_result="$bench_result in $(( $(date +%s) - start )) s (log: $logs/gpu-bench.log)"
  fi
fi

echo
echo "gpu_check: tests: $tests_result"
echo "gpu_check: benchmark: $bench_result"
if [ -f "$logs/papers-models-gpu.md" ] && [ "$what" != tests ]; then cat "$logs/papers-models-gpu.md"; fi
[ "$tests_result" != FAILED ]
