"""The .grad read watch: who reads a parameter's .grad in the window where DDP's holds the
mean (mode "auto" learns from it whether a loop needs the mean on the workers; server mode
refuses such a read), and the guard that stops gradient clipping of a server-mode model
instead of clipping nothing."""
import functools
import inspect
import linecache
import os
import sys
import weakref

import torch

SERVER_MODELS = weakref.WeakSet()  # open models in server mode: their .grad is never the mean


class GradReads:
    """Who reads a parameter's .grad while a model watches it: from the end of its backward
    to the next training forward or zero_grad (the window in which DDP's .grad holds the
    mean). Mode "auto" learns from it whether the loop needs the mean on the workers; server
    mode refuses such a read, which would see no mean. Python cannot hook an attribute read
    of a tensor otherwise: a property on torch.nn.Parameter (installed by the first model,
    once per process) reads the real .grad and, only while some window is open, reports.
    zero_grad's own reads are not reads of the mean."""

    TENSOR_GRAD = torch._C.TensorBase.grad
    watch = {}  # id(parameter) -> weak reference to the model whose window is open

    @classmethod
    def install(cls):
        if isinstance(torch.nn.Parameter.__dict__.get("grad"), property):
            return
        cls.zeroing = {torch.nn.Module.zero_grad.__code__, inspect.unwrap(torch.optim.Optimizer.zero_grad).__code__}
        torch.nn.Parameter.grad = property(cls.get, lambda p, v: cls.TENSOR_GRAD.__set__(p, v),
                                           lambda p: cls.TENSOR_GRAD.__delete__(p), doc=cls.TENSOR_GRAD.__doc__)

    @classmethod
    def get(cls, p):
        grad = cls.TENSOR_GRAD.__get__(p)
        if cls.watch:
            ref = cls.watch.get(id(p))
            model = ref() if ref is not None else None
            reader = sys._getframe(1) if model is not None else None
            if reader is not None and reader.f_code not in cls.zeroing:
                model._grad_read(reader)
        return grad

    @staticmethod
    def site(frame):
        """The loop's line behind a read: the first caller outside torch and this package."""
        inside = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)))
        f = frame
        while f is not None and f.f_code.co_filename.startswith(inside):
            f = f.f_back
        f = f or frame
        return f"{f.f_code.co_filename}:{f.f_lineno}: {linecache.getline(f.f_code.co_filename, f.f_lineno).strip()}"

    @classmethod
    def open(cls, model, params):
        ref = weakref.ref(model)
        for p in params:
            cls.watch[id(p)] = ref

    @classmethod
    def close(cls, params):
        for p in params:
            cls.watch.pop(id(p), None)


def guard_clipping():
    """Gradient clipping of a server-mode model's parameters stops with an error instead of
    clipping nothing: the servers have taken (and applied) the gradients by then. Wraps
    torch.nn.utils' clipping where its public spellings reach it, once per process, when
    poseidon is imported (so that a later `from torch.nn.utils import clip_grad_value_`
    gets the guarded one); other parameters pass through untouched."""
    import torch.nn.utils.clip_grad as clip_grad
    if getattr(clip_grad, "_poseidon_guarded", False):
        return

    def check(parameters):
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        ids = {id(p) for p in params}
        for m in list(SERVER_MODELS):
            if m.is_open() and ids & m._param_ids:
                raise ValueError("gradient clipping of a model in server mode: the parameter servers apply the "
                                 "gradients themselves, so .grad never holds the mean to clip; pass mode='gradient' "
                                 "to DistributedModel (then clip after loss.backward(), as with DDP)" + m._auto_note())
        return params

    with_norm = clip_grad._clip_grads_with_norm_  # clip_grad_norm_ calls it by its module name
    value = clip_grad.clip_grad_value_

    @functools.wraps(with_norm)
    def guarded_with_norm(parameters, *args, **kwargs):
        return with_norm(check(parameters), *args, **kwargs)

    @functools.wraps(value)
    def guarded_value(parameters, *args, **kwargs):
        return value(check(parameters), *args, **kwargs)

    clip_grad._clip_grads_with_norm_ = guarded_with_norm
    if getattr(torch.nn.utils, "clip_grads_with_norm_", None) is with_norm:  # its public name (torch >= 2.6)
        torch.nn.utils.clip_grads_with_norm_ = guarded_with_norm
    clip_grad.clip_grad_value_ = torch.nn.utils.clip_grad_value_ = guarded_value
    clip_grad._poseidon_guarded = True


guard_clipping()
