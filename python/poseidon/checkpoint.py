"""Checkpoints of a whole Python job, in the C++ core's format (src/checkpoint/):

    DIR/iter-<T>/rank-<r>.state   each rank's session state (parameters, the servers' values
                                  and momentum, SFB/allreduce replicas, buffers, error
                                  feedback's residuals) and, in the
                                  same checksummed file, this package's own bytes: the
                                  optimizer's state_dict (gradient mode: Adam's moments, ...),
                                  the state_dict of every checkpoint object (an LR scheduler,
                                  a GradScaler), pickled; torch's random state as the
                                  core's records, as `poseidon train` writes it
    DIR/iter-<T>/MANIFEST         sizes and CRCs, written last; DIR/LATEST names the newest

When a save falls due at optimizer.step() of step T, torch's random state is taken there
(the state the loop's next draws start from) and the checkpoint is written at the next
forward, or at close(): by then the loop has also stepped its scheduler for step T. A
resumed job gets the random state back when the DistributedModel is made (make it just
before the loop), starts at `model.start_iteration`, and gets parameters, optimizer and
objects back at its first forward, when the session exists. Same model, options and -np.
"""
import io
import operator
import pickle

import torch

from . import _C


class Checkpoints:
    """The checkpoint options and state of one DistributedModel."""

    def __init__(self, directory, every, resume, objects, runtime):
        try:
            every = operator.index(every)
        except TypeError:
            raise TypeError(f"checkpoint_every must be a whole number of iterations, not {every!r}") from None
        _C.check_checkpoint_options(str(directory or ""), every)  # the CLI's checks too
        if resume is True and not directory:
            raise ValueError("resume=True resumes from checkpoint_dir: pass checkpoint_dir, or resume='FOLDER'")
        self.directory = directory
        self.every = int(every)
        self.objects = list(objects)
        _check_objects(self.objects)
        self.resume_dir = directory if resume is True else (resume or None)
        self.runtime = runtime
        self.ranks = runtime.size()
        self.pending = None  # (iteration, random state) of a save to write at the next forward
        # What the plan was made from beyond the model: each lookup layer's rows touched in the
        # probe's batch (layers.py), saved so that a resumed run plans as the saving run did.
        self.rows_touched = {}
        self.info, self.saved, self.random = None, None, None
        if self.resume_dir:
            self.info, self.saved, self.random = _read_resume(str(self.resume_dir), runtime)

    @property
    def start_iteration(self):
        return int(self.info.iteration) if self.info else 0

    def saved_rows_touched(self):
        """The resumed checkpoint's rows touched per lookup layer ({} for none, or a checkpoint
        written before they were saved): every rank read the same, the saving ranks' agreed figures."""
        return dict((self.saved or {}).get("rows_touched", {}))

    def due(self, iteration):
        return self.every > 0 and iteration % self.every == 0

    def mark(self, iteration):
        """A save is due after this step: the random state now, the rest at the next forward."""
        self.pending = (iteration, _random_state())

    def flush(self, core, config, optimizer, mode):
        if self.pending:
            iteration, random = self.pending
            self.pending = None
            self.save(core, iteration, config, optimizer, mode, random)

    def save(self, core, iteration, config, optimizer, mode, random=None):
        """mode: where the saving run's optimizer steps ("auto" while undecided), which a
        resumed run in mode "auto" takes over (its session must match the saved one)."""
        if not self.directory:
            raise ValueError("save_checkpoint() needs checkpoint_dir (the folder to save in)")
        _check_objects(self.objects)
        extra = io.BytesIO()
        bad = None
        try:  # before the agreement: a rank that cannot take it stops them all
            random = random or _random_state()
        except Exception as e:  # noqa: BLE001
            bad = f"taking torch's random state: {e}"
        state = {"optimizer": optimizer.state_dict(), "objects": [o.state_dict() for o in self.objects], "mode": mode,
                 "rows_touched": dict(self.rows_touched)}
        # Nothing is written that a resume would refuse, and every rank stops together.
        bad = bad or _not_plain(state)
        if not all_agree(self.runtime, bad is None):
            raise ValueError(f"saving a checkpoint: {bad}" if bad else
                             "saving a checkpoint: another rank's optimizer or checkpoint objects hold state that "
                             "checkpoints cannot keep (its error names it)")
        torch.save(state, extra)
        core.synchronize()
        core.save_checkpoint(str(self.directory), iteration, config, random, extra.getvalue())
        if core.rank() == 0:
            print(f"poseidon: checkpoint of iteration {iteration} saved in {self.directory}", flush=True)

    def restore(self, core, config, optimizer):
        """At the first forward: the session's state (all ranks together), then the optimizer's
        and the objects' (the random state came back at construction)."""
        if not self.info:
            return
        _C.check_checkpoint(self.info, config, self.ranks)  # the settings first: the likelier mistake
        if len(self.saved["objects"]) != len(self.objects):
            raise ValueError(f"the checkpoint holds {len(self.saved['objects'])} checkpoint objects, this run has "
                             f"{len(self.objects)}: pass the same ones as the saved run")
        core.load_checkpoint(str(self.resume_dir), self.info, config, self.random)
        optimizer.load_state_dict(self.saved["optimizer"])
        for o, state in zip(self.objects, self.saved["objects"]):
            o.load_state_dict(state)
        self.saved = None
        if core.rank() == 0:
            print(f"poseidon: resumed from {self.info.folder} at iteration {self.info.iteration}", flush=True)


def all_agree(runtime, mine):
    """True on every rank if every rank passed True (a collective)."""
    with _C.Collectives(runtime) as job:
        return job.all_agree(mine)


def _check_objects(objects):
    for o in objects:
        if not (hasattr(o, "state_dict") and hasattr(o, "load_state_dict")):
            raise TypeError(f"checkpoint_objects: {type(o).__name__} has no state_dict()/load_state_dict()")


def _read_resume(folder, runtime):
    """The newest checkpoint's manifest, this rank's own bytes unpickled and its random state;
    every rank succeeds or every rank raises (the others name no cause: the failing rank does)."""
    info, state, random, error = None, None, None, None
    try:
        info = _C.latest_checkpoint(folder, runtime.size())
        random = _C.RandomState.read(info, runtime.rank())
        extra = _C.checkpoint_extra(info, runtime.rank())
        if not extra:
            raise ValueError(f"the checkpoint in {info.folder} holds no Python state (written by `poseidon train`?): "
                             "resume it with the program that wrote it")
        state = _loads(extra, f"resuming from {info.folder}")
        if random.empty():
            raise ValueError(f"the checkpoint in {info.folder} keeps its random state the way Poseidon did before "
                             "2026-11-27: resume it with the version that wrote it")
        random.apply()  # the GPUs this process sees (a saving run may have seen more); inside the agreement
    except Exception as e:  # noqa: BLE001  (whatever it is, every rank must hear of it)
        error = e
    if not all_agree(runtime, error is None):
        raise error or ValueError(f"cannot resume from {folder}: another rank could not read its checkpoint")
    return info, state, random


_PLAIN = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device, torch.Size)


def _random_state():
    """torch's CPU generator, and the GPUs' (dropout on a GPU draws there) once CUDA is in use."""
    in_use = torch.cuda.is_available() and torch.cuda.is_initialized()
    return _C.RandomState.take(list(range(torch.cuda.device_count())) if in_use else [])


def _not_plain(obj, where="state"):
    """None when obj holds only what torch.load(weights_only=True) reads back (tensors,
    numbers, strings, containers), else a line naming the first thing that is not."""
    if isinstance(obj, (torch.Tensor,) + _PLAIN):
        return None
    if isinstance(obj, (list, tuple, set)):
        items = enumerate(obj)
    elif isinstance(obj, dict):
        items = obj.items()
    else:
        return (f"the optimizer's or a checkpoint object's state_dict() holds a {type(obj).__name__} at {where}; "
                "checkpoints keep tensors, numbers, strings and containers only")
    for key, value in items:
        bad = _not_plain(value, f"{where}[{key!r}]")
        if bad:
            return bad
    return None


def _loads(data, doing):
    """A checkpoint's Python state: tensors, numbers, strings and containers only
    (torch.load's weights_only=True, the default since torch 2.6): a file on disk never runs
    code when it is read. Anything else gets one line naming what to change."""
    try:
        # Onto the CPU: this run's ranks may see other GPUs than the saving run's;
        # load_state_dict moves each optimizer state to its parameter's device.
        return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{doing}: the optimizer's or a checkpoint object's state_dict() holds something other than "
                         f"tensors, numbers, strings and containers ({first}); checkpoints keep only those") from None


def config_of(model, core):
    """One line: what a resumed job must share with the saved one. The core's (the options,
    the model, the plan, the nodes: Session::resumeConfiguration, as `poseidon train`'s) and
    the optimizer whose state_dict the checkpoint holds."""
    return core.resume_configuration(f"python optimizer={type(model.optimizer).__name__}")
