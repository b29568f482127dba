"""The process settings `poseidon train` makes for itself (apps/poseidon/allocator.h and
blas_kernels.h), made for a PyTorch user's process by poseidon.init():
  - glibc's malloc keeps freed activations (mmap above 32 MB, trim above 512 MB) instead of
    returning them to the kernel and faulting them in again every iteration (up to 15% of a
    convnet's time); MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ in the environment win;
  - Debian's OpenBLAS 0.3.21 falls back to its SSE3 "Prescott" kernels on Intel CPUs it does
    not know, 2-4x slower GEMMs; it reads OPENBLAS_CORETYPE only when it is loaded, so the
    process is started again with the kernels the CPU has (before MPI starts). A user's own
    OPENBLAS_CORETYPE is kept.
"""
import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_REEXEC_MARK = "POSEIDON_BLAS_REEXEC"


def keep_freed_memory():
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(_M_TRIM_THRESHOLD, 512 << 20)


def blas_kernels():
    """The kernels OpenBLAS runs (e.g. "Haswell"), or "" for another BLAS."""
    try:
        lib = ctypes.CDLL("libblas.so.3")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return ""


def _best_kernels():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags):
        return "SkylakeX"
    if {"avx2", "fma"} <= set(flags):
        return "Haswell"
    return None


def select_blas_kernels():
    if "OPENBLAS_CORETYPE" in os.environ or _REEXEC_MARK in os.environ or blas_kernels() != "Prescott":
        return
    kernels = _best_kernels()
    if kernels is None:
        return
    argv = getattr(sys, "orig_argv", None)
    if not argv or len(argv) < 2 or argv[1] == "-c" and len(argv) == 2:
        print(f"poseidon: OpenBLAS runs its slow generic kernels on this CPU; start Python with "
              f"OPENBLAS_CORETYPE={kernels} for {kernels} ones", file=sys.stderr)
        return
    os.environ["OPENBLAS_CORETYPE"] = kernels
    os.environ[_REEXEC_MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, [sys.executable] + argv[1:])
    except OSError:  # run on with the slow kernels rather than not at all
        del os.environ["OPENBLAS_CORETYPE"], os.environ[_REEXEC_MARK]
