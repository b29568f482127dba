#!/bin/sh
# Runs the command after it only where PyTorch sees a CUDA GPU; elsewhere exits 77, which
# ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#   if_gpu.sh PYTHON COMMAND ARGS...
python="$1"
shift
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "skipped: no CUDA GPU visible to PyTorch ($("$python" -c 'import torch; print(torch.__version__)' 2>&1))"
  exit 77
fi
exec "$@"
