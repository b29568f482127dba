#!/bin/sh
# Runs the command after it only where PyTorch sees a CUDA GPU; elsewhere exits 77, which
# ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#   if_gpu.sh PYTHON COMMAND ARGS...
# Without an NVIDIA device node (/dev/nvidia0, /dev/nvidiactl) no CUDA runtime can see a
# GPU, so that case skips without importing torch (4 s a time on a 2-core CI machine, five
# tests); with one, PyTorch itself decides.
python="$1"
shift
skip() {
  echo "skipped: $1"
  exit 77
}
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  skip "no NVIDIA GPU device node (/dev/nvidia0...) on this machine"
fi
if ! reason=$("$python" -c 'import torch; print("" if torch.cuda.is_available() else "no CUDA GPU visible to PyTorch " + torch.__version__)' 2>&1); then
  skip "PyTorch did not import: $(echo "$reason" | tail -1)"
fi
[ -z "$reason" ] || skip "$reason"
exec "$@"
