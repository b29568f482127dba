#!/bin/sh
# Runs the command after it only where PyTorch sees a CUDA GPU; elsewhere exits 77, which
# ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#   if_gpu.sh PYTHON COMMAND ARGS...
# Without an NVIDIA GPU's device node (/dev/nvidia0, /dev/nvidia1, ...) CUDA sees no GPU on
# Linux, so that case skips without importing torch (4 s a time on a 2-core CI machine,
# five tests); with one, PyTorch itself decides. Docker's --gpus, Kubernetes and MIG keep
# those nodes; where a GPU has none (WSL2's /dev/dxg, ROCm's /dev/kfd),
# POSEIDON_GPU_CHECK=torch asks PyTorch straight away.
python="$1"
shift
skip() {
  echo "skipped: $1"
  exit 77
}
if [ "${POSEIDON_GPU_CHECK:-}" != torch ] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  skip "no NVIDIA GPU device node (/dev/nvidia0...) on this machine (POSEIDON_GPU_CHECK=torch: ask PyTorch)"
fi
# One interpreter start: exit 0 with a GPU, 1 without (saying which torch), 2 if torch fails
# to import. Only stdout is the verdict: a warning on stderr must not skip a GPU host.
verdict=$("$python" -c '
import sys
try:
    import torch
except Exception as e:
    print(f"PyTorch did not import: {e}"); sys.exit(2)
if not torch.cuda.is_available():
    print(f"no CUDA GPU visible to PyTorch {torch.__version__}"); sys.exit(1)
' 2>/dev/null) || skip "${verdict:-the GPU check could not run $python}"
exec "$@"
