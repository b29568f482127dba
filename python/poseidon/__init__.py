"""Poseidon for PyTorch: data-parallel training over ordinary Ethernet (Zhang et al., ATC'17).

    import poseidon
    poseidon.init()                                        # + launch with mpirun -np N
    model = poseidon.DistributedModel(model, optimizer)    # any torch.nn.Module
    ... the usual loop: loss.backward(); optimizer.step(); optimizer.zero_grad()

See poseidon/model.py for the options (scheme, mode, buffers, accumulation, SSP, ...).
"""
import ctypes
import ctypes.util

import torch  # noqa: F401  (the extension links torch's libraries: load them first)

# OpenMPI loads its components with dlopen; they need libmpi's symbols visible globally,
# which the libraries of a Python extension are not by default.
_libmpi = ctypes.util.find_library("mpi")
if _libmpi:
    ctypes.CDLL(_libmpi, mode=ctypes.RTLD_GLOBAL)

from . import _C  # noqa: E402

from .broadcast import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from .collectives import Average, Sum, allgather, allreduce, allreduce_, barrier, broadcast, broadcast_
from .model import DistributedModel
from .runtime import init, is_initialized, local_rank, local_size, rank, shutdown, size

Error = _C.Error
InputError = _C.InputError

__all__ = ["init", "is_initialized", "shutdown", "rank", "size", "local_rank", "local_size", "DistributedModel",
           "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allreduce", "allreduce_",
           "allgather", "broadcast", "broadcast_", "barrier", "Average", "Sum", "Error", "InputError"]
