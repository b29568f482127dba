"""Horovod's start-up helpers: make every rank start from rank 0's state.

DistributedModel already broadcasts rank 0's parameters and buffers when it starts; these
are for state it does not own (a model trained without it, an optimizer loaded from disk).
"""
import io

import torch

from . import _C
from . import runtime


def broadcast_parameters(params, root_rank=0):
    """Copies root_rank's tensors into every rank's, in place. `params`: a state_dict, or
    (name, tensor) pairs such as model.named_parameters(); every rank passes the same names."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    for name, t in items:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"broadcast_parameters: '{name}' is not a tensor")
    names = "\n".join(f"{name} {tuple(t.shape)} {t.dtype}" for name, t in items).encode()
    with _C.Collectives(runtime.runtime()) as job, torch.no_grad():
        same = job.broadcast_bytes(names, root_rank) == names
        if not job.all_agree(same):  # every rank stops, none waits in a broadcast
            raise ValueError("broadcast_parameters: the ranks passed different tensors (names, shapes or dtypes)")
        for name, t in items:
            src = t.detach()
            # The transport moves host memory: a GPU tensor goes through a CPU copy.
            buf = src if src.is_contiguous() and src.device.type == "cpu" else src.to("cpu").contiguous()
            job.broadcast_tensor_(buf, root_rank)
            if buf is not src:
                src.copy_(buf)


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Gives every rank root_rank's optimizer state (its state_dict, hyper-parameters included)."""
    mine = b""
    if runtime.rank() == root_rank:
        out = io.BytesIO()
        torch.save(optimizer.state_dict(), out)
        mine = out.getvalue()
    theirs = _broadcast_bytes(mine, root_rank)
    if runtime.rank() != root_rank:
        # Unpickled onto the CPU first (this rank may have another GPU than root_rank);
        # load_state_dict moves each state to its parameter's device.
        optimizer.load_state_dict(_from_root(theirs, map_location="cpu"))


def broadcast_object(obj, root_rank=0):
    """root_rank's picklable object, on every rank."""
    mine = b""
    if runtime.rank() == root_rank:
        out = io.BytesIO()
        torch.save(obj, out)
        mine = out.getvalue()
    return _from_root(_broadcast_bytes(mine, root_rank))


def _broadcast_bytes(mine, root_rank):
    with _C.Collectives(runtime.runtime()) as job:
        return job.broadcast_bytes(mine, root_rank)


def _from_root(data, map_location=None):
    """Unpickles what root_rank of this same job pickled: any picklable object (as Horovod's
    broadcast_object), so weights_only=False, said rather than left to torch's default
    (weights_only=True since torch 2.6, which refuses arbitrary objects). These bytes never
    come from a file: checkpoints load with weights_only=True (checkpoint.py)."""
    return torch.load(io.BytesIO(data), weights_only=False, map_location=map_location)
