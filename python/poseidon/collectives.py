"""Collectives on the user's own tensors, with Horovod's names: a test metric averaged over
the ranks, a tensor gathered from every rank, rank 0's value everywhere.

    correct = poseidon.allreduce(torch.tensor(correct), op=poseidon.Sum)
    accuracy = poseidon.allreduce(torch.tensor(accuracy))          # the mean over the ranks

CPU and CUDA tensors (they travel through host memory), any dtype; every rank calls the same
collectives in the same order. They go through Poseidon's own transport on a communicator of
their own, so they may run beside a training DistributedModel. Each reduction adds the ranks'
tensors in rank order on every rank: the result is the same everywhere and run to run. The
tensors go whole to every rank (an allgather): these are for metrics and small state, not
for gradients (DistributedModel moves those).
"""
import io

import torch

from . import _C
from . import runtime

Average = "average"
Sum = "sum"


def allreduce(tensor, op=Average, name=None):
    """A new tensor on `tensor`'s device: the ranks' tensors summed (op=Sum) or their mean
    (op=Average, the default as in Horovod; floating-point tensors only)."""
    if op not in (Average, Sum):
        raise ValueError(f"allreduce: op={op!r}: use poseidon.Average or poseidon.Sum")
    if op == Average and not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"allreduce: op=Average of a {tensor.dtype} tensor: use op=poseidon.Sum (or a float tensor)")
    parts = _gathered(tensor, "allreduce" + (f" '{name}'" if name else ""))
    first = parts[0]
    if any(p.shape != first.shape or p.dtype != first.dtype for p in parts):
        raise ValueError("allreduce" + (f" '{name}'" if name else "") + ": the ranks passed tensors of different "
                         f"shapes or dtypes: {sorted({(tuple(p.shape), str(p.dtype)) for p in parts})}")
    total = first.clone()
    for p in parts[1:]:  # in rank order, on every rank: the same sum everywhere
        total += p
    if op == Average:
        total /= len(parts)
    return total.to(tensor.device)


def allreduce_(tensor, op=Average, name=None):
    """allreduce() written into `tensor`; returns it."""
    with torch.no_grad():
        tensor.copy_(allreduce(tensor, op, name))
    return tensor


def allgather(tensor, name=None):
    """Every rank's tensor concatenated along the first dimension, in rank order (their first
    dimensions may differ, the rest must not), on `tensor`'s device."""
    parts = _gathered(tensor, "allgather" + (f" '{name}'" if name else ""))
    if any(p.shape[1:] != parts[0].shape[1:] or p.dtype != parts[0].dtype for p in parts):
        raise ValueError("allgather" + (f" '{name}'" if name else "") + ": the ranks' tensors differ beyond their "
                         "first dimension or in dtype")
    return torch.cat([p if p.dim() else p.reshape(1) for p in parts]).to(tensor.device)


def broadcast(tensor, root_rank=0, name=None):
    """A new tensor: root_rank's `tensor`, on this rank's tensor's device."""
    with _C.Collectives(runtime.runtime()) as job:
        mine = _to_bytes(tensor) if runtime.rank() == root_rank else b""
        return _from_bytes(job.broadcast_bytes(mine, root_rank)).to(tensor.device)


def broadcast_(tensor, root_rank=0, name=None):
    """root_rank's values written into `tensor` (same shape and dtype on every rank); returns it."""
    value = broadcast(tensor, root_rank, name)
    if value.shape != tensor.shape or value.dtype != tensor.dtype:
        raise ValueError("broadcast_" + (f" '{name}'" if name else "") + f": rank {root_rank}'s tensor is "
                         f"{tuple(value.shape)} {value.dtype}, this rank's {tuple(tensor.shape)} {tensor.dtype}")
    with torch.no_grad():
        tensor.copy_(value)
    return tensor


def barrier():
    """Returns once every rank has called it."""
    with _C.Collectives(runtime.runtime()) as job:
        job.barrier()


def _gathered(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what}: pass a torch.Tensor, not {type(tensor).__name__}")
    with _C.Collectives(runtime.runtime()) as job:
        return [_from_bytes(b) for b in job.allgather_bytes(_to_bytes(tensor))]


def _to_bytes(tensor):
    out = io.BytesIO()
    torch.save(tensor.detach().to("cpu").contiguous(), out)
    return out.getvalue()


def _from_bytes(data):
    return torch.load(io.BytesIO(data), weights_only=True)
