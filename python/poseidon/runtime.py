"""The process's Poseidon runtime: MPI, started by init() (as horovod.torch.init()).

Under `mpirun -np N` every process is a rank; started without mpirun, the process is a
job of one (MPI's singleton mode). The runtime lives until the interpreter exits; models
made from it are closed first.
"""
import atexit
import os
import sys
import time
import weakref

from . import _C
from . import process_setup


class _Process:
    """What this process holds: the runtime and the models still open."""

    def __init__(self):
        self.runtime = None
        self.models = weakref.WeakSet()


_process = _Process()


def init():
    """Starts MPI (once; later calls do nothing). Call before anything else. Sets up the
    process as `poseidon train` does (process_setup.py): malloc thresholds, OpenBLAS kernels."""
    if _process.runtime is None:
        process_setup.select_blas_kernels()  # may start this process again, before MPI
        process_setup.keep_freed_memory()
        _process.runtime = _C.Runtime()
        atexit.register(shutdown)
        _end_job_on_uncaught_exceptions()


def _end_job_on_uncaught_exceptions():
    """An exception nobody caught ends the whole job at once, as it does under Horovod or
    DDP: printed as Python prints it, then MPI_Abort, so mpirun stops every rank with a
    non-zero exit. Without this the interpreter's exit would close the models, and closing
    waits for the other ranks, which wait in their syncs for this one until the timeout.
    A timeout that names no worker directly first waits (let_the_direct_witness_speak)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        if _process.runtime is None or _process.runtime.size() == 1:
            previous(kind, value, tb)
            return  # alone: the usual exit is prompt
        let_the_direct_witness_speak(value)
        previous(kind, value, tb)
        print(f"poseidon: rank {_process.runtime.rank()}: uncaught {kind.__name__}; ending the whole job",
              file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        _process.runtime.abort_job(1)

    sys.excepthook = hook


def let_the_direct_witness_speak(error):
    """Before this rank ends the job or tells the others it is leaving (a model closed while
    `error` is on its way up): a timeout that names no worker directly (only shards that
    went silent, which may be waiting on the stalled rank in turn, or every peer at once)
    waits CulpritTimeout's grace, once, as `poseidon train` does, so that a rank that saw
    the stalled one ends the job with the error that names it."""
    if (_process.runtime is None or _process.runtime.size() == 1 or not isinstance(error, _C.CulpritTimeout)
            or getattr(error, "names_worker", True) or getattr(error, "_grace_given", False)):
        return
    error._grace_given = True
    time.sleep(_C.INDIRECT_WITNESS_GRACE_S)


def is_initialized():
    return _process.runtime is not None


def shutdown():
    """Closes every open model (each waits for the other ranks), then ends MPI."""
    for model in list(_process.models):
        model.close()
    _process.runtime = None


def runtime():
    if _process.runtime is None:
        raise RuntimeError("poseidon.init() has not been called")
    return _process.runtime


def register(model):
    """A transport carries one session: the models of a process run one after another."""
    if any(m.is_open() for m in _process.models):
        raise ValueError("another poseidon.DistributedModel is open in this process: close() it first")
    _process.models.add(model)


def rank():
    """This process's rank in the job, 0 .. size() - 1."""
    return runtime().rank()


def size():
    """Processes in the job."""
    return runtime().size()


def local_rank():
    """This process's rank among those on its host (OpenMPI's OMPI_COMM_WORLD_LOCAL_RANK)."""
    runtime()
    return int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))


def local_size():
    runtime()
    return int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
