"""A torch.nn.Module as the coordinator's layers, and the probe that learns how its forward
uses them.

A *layer* is a module that owns trainable parameters directly, named by its path in the
module tree (``layer2.0.conv1``; ``root`` for the model itself). Linear is FC (it may go by
sufficient factors), Conv1d/2d/3d CONV, anything else OTHER. A tensor shared by two modules
(tied weights) belongs to the first.

The probe runs one forward without gradients (buffers and random state left as they were)
and watches every torch function call. From it Poseidon learns, per layer:
  - whether every use of its parameters happens while its own module runs: then a forward
    pre-hook on that module can wait for just that layer (the next forward overlaps the
    syncs of the layers above); otherwise the layer is waited for before the forward;
  - for a Linear, whether its parameters are used only by its own forward (then its input
    and output gradient are its sufficient factors) and how many factor rows one example
    makes (a Linear on [B, T, E] makes T: the cost model's K is batch x T);
  - for an Embedding or EmbeddingBag whose weight only its own lookup reads, how many
    distinct rows the batch touched: its gradient is zero elsewhere, and the cost model
    weighs sending just those rows (sparse rows) against the dense gradient;
  - the order in which layers are first used (the coordinator's forward order).
What it cannot vouch for goes the safe way: a layer used outside its module's forward is
waited for before the whole forward; a Linear whose forward does not run, whose parameters
another module reads, that runs inside torch.utils.checkpoint (its forward runs again
in backward) or under autocast (half-precision output) goes by PS (or allreduce, under
auto), not by factors. DistributedModel.describe() shows each decision.
"""
import json
from dataclasses import dataclass

import torch
import torch.utils.checkpoint
from torch.overrides import TorchFunctionMode

_CONV = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_LOOKUPS = (torch.nn.Embedding, torch.nn.EmbeddingBag)


@dataclass
class Layer:
    name: str
    module: torch.nn.Module
    params: list  # [(name, tensor)], trainable, in registration order
    kind: str = "other"  # fc, conv, other
    M: int = 0
    N: int = 0
    linear: bool = False  # a Linear that trains its weight (and bias) and nothing else
    # Found by the probe:
    factorable: bool = False
    why_not_factors: str = ""  # a Linear that is not factorable: why (describe())
    rows_per_example: int = 1
    self_waited: bool = False
    used: bool = False  # the probe's forward used its parameters
    lookup: bool = False  # an Embedding/EmbeddingBag training its weight alone, dense gradient
    rows_touched: int = -1  # a lookup's distinct rows in the probe's batch; -1: not row-sparse


def find_layers(module):
    """The layers of `module`, in registration order; frozen parameters are left out."""
    layers, seen = [], set()
    for path, m in module.named_modules():
        params = []
        for name, p in m.named_parameters(recurse=False):
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append((name, p))
        if not params:
            continue
        layer = Layer(name=path or "root", module=m, params=params)
        # SFB rebuilds y = x W^T + b: only a Linear whose forward is Linear's own, and whose
        # output no forward hook of the user's changes (U must be the gradient at y itself).
        plain = (isinstance(m, torch.nn.Linear) and type(m).forward is torch.nn.Linear.forward
                 and not m._forward_hooks and not torch.nn.modules.module._global_forward_hooks)
        if plain and [n for n, _ in params] in (["weight"], ["weight", "bias"]):
            layer.kind, layer.linear = "fc", True
            layer.M, layer.N = m.out_features, m.in_features
        elif isinstance(m, torch.nn.Linear):
            layer.why_not_factors = "its forward, hooks or trainable tensors are not Linear's own"
        elif isinstance(m, _CONV):
            layer.kind = "conv"
        elif isinstance(m, _LOOKUPS) and type(m).forward in (l.forward for l in _LOOKUPS):
            # sparse=True makes a sparse gradient (refused later); max_norm rewrites rows in forward.
            layer.lookup = [n for n, _ in params] == ["weight"] and not m.sparse and m.max_norm is None
        layers.append(layer)
    return layers


def _tensors(obj):
    """Every tensor inside nested lists, tuples and dicts."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


class _Watch(TorchFunctionMode):
    """Records, for each torch function call on a layer's parameter, which modules run."""

    def __init__(self, owner):
        super().__init__()
        self.owner = owner  # id(parameter) -> layer index
        self.stack = []  # modules whose forward is running, innermost last
        self.first_use = {}  # layer -> order of its first use
        self.outside = set()  # layers used while their module was not running
        self.foreign = set()  # layers used by a module other than their own, innermost
        self.checkpointed = 0  # depth of torch.utils.checkpoint calls now running
        self.recomputed = set()  # layers used inside one: their forward runs again in backward
        self.low_precision = {}  # Linear layers whose output is not float32 (autocast): their dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for t in _tensors((args, kwargs)):
            layer = self.owner.get(id(t))
            if layer is not None:
                self.use(layer[0], layer[1])
        return func(*args, **kwargs)

    def use(self, index, module):
        self.first_use.setdefault(index, len(self.first_use))
        if self.checkpointed:
            self.recomputed.add(index)
        if not any(m is module for m in self.stack):
            self.outside.add(index)
        if not self.stack or self.stack[-1] is not module:
            self.foreign.add(index)


def _watch_checkpoint(watch):
    """Counts the torch.utils.checkpoint regions running, however the program reaches them
    (`checkpoint` imported by name, `checkpoint_sequential`, reentrant or not): the module's
    own entry points, which every public call looks up in the module when it runs, are
    wrapped. Returns what puts them back."""
    module = torch.utils.checkpoint
    saved = {}

    def counted(run):
        watch.checkpointed += 1
        try:
            return run()
        finally:
            watch.checkpointed -= 1

    reentrant = getattr(module, "CheckpointFunction", None)
    if reentrant is not None:  # use_reentrant=True: CheckpointFunction.apply(function, preserve, *args)
        saved["CheckpointFunction"] = reentrant
        module.CheckpointFunction = type("WatchedCheckpointFunction", (), {
            "apply": staticmethod(lambda *a: counted(lambda: reentrant.apply(*a)))})
    plain = getattr(module, "_checkpoint_without_reentrant_generator", None)
    if plain is not None:  # use_reentrant=False: the function runs between the generator's two steps
        saved["_checkpoint_without_reentrant_generator"] = plain

        def watched_generator(*a, **k):
            gen = plain(*a, **k)
            next(gen)
            watch.checkpointed += 1
            try:
                yield
            finally:
                watch.checkpointed -= 1
            yield from gen

        module._checkpoint_without_reentrant_generator = watched_generator

    def restore():
        for name, value in saved.items():
            setattr(module, name, value)
    return restore


def _why_not_factors(i, rows, watch):
    """"" when Linear i's input and output gradient are its sufficient factors, else why not."""
    if i in watch.recomputed:
        return "it runs inside torch.utils.checkpoint (its forward runs again in backward)"
    if i in watch.low_precision:
        return (f"it computes in {str(watch.low_precision[i]).replace('torch.', '')} (autocast): its float32 "
                "reconstruction from factors would round otherwise than the dense gradient")
    if i not in rows:
        return "its forward did not run in the probe (another module's forward may read its parameters)"
    if i in watch.foreign:
        return "another module reads its parameters (or its input is not [rows, in_features])"
    return ""


def outside_compiled_forward(layers):
    """A model compiled by torch.compile: no hook of Poseidon's runs inside its forward,
    where each would break the compiled graph. Every layer is waited for before the forward
    and no Linear goes by factors (their capture is a forward hook)."""
    for layer in layers:
        layer.self_waited = False
        if layer.linear and not layer.why_not_factors:
            layer.why_not_factors = "the model is compiled (torch.compile): capturing factors would break its graph"
            layer.factorable = False


def batch_of(args, kwargs):
    """Examples in a forward's inputs: the first dimension of its first tensor of rank >= 1."""
    return next((t.shape[0] for t in _tensors((args, kwargs)) if t.dim() > 0), 1)


def probe(root, layers, args, kwargs):
    """Runs root(*args, **kwargs) once, watched; fills each layer's probe fields. Returns
    the layer indices in order of first use (unused ones last) and the batch size."""
    owner = {id(p): (i, layer.module) for i, layer in enumerate(layers) for _, p in layer.params}
    index_of = {id(layer.module): i for i, layer in enumerate(layers)}
    watch = _Watch(owner)
    rows = {}
    ids = {}  # lookup layer -> the ids its forwards read
    handles = []

    def pre(module, inputs):
        watch.stack.append(module)
        i = index_of.get(id(module))
        if i is not None and layers[i].lookup and inputs and isinstance(inputs[0], torch.Tensor):
            ids.setdefault(i, []).append(inputs[0].detach().reshape(-1))
        if i is not None:
            watch.first_use.setdefault(i, len(watch.first_use))
            if watch.checkpointed:
                watch.recomputed.add(i)

    def post(module, inputs, output):
        watch.stack.pop()
        i = index_of.get(id(module))
        if i is not None and layers[i].linear and isinstance(output, torch.Tensor) and output.dtype != torch.float32:
            watch.low_precision[i] = output.dtype  # autocast: the dense gradient is a half-precision GEMM's
        if i is not None and layers[i].linear and inputs and isinstance(inputs[0], torch.Tensor):
            x = inputs[0]
            if x.dim() >= 1 and x.shape[-1] == layers[i].N:
                rows[i] = rows.get(i, 0) + x.numel() // max(1, x.shape[-1])
            else:
                watch.foreign.add(i)  # an input SFB would not see as [rows, N]

    for m in root.modules():
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    buffers = [b.detach().clone() for b in root.buffers()]
    rng = torch.get_rng_state()
    # Dropout on a GPU draws from that GPU's generator: the probe leaves it as it was too.
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    restore_checkpoint = _watch_checkpoint(watch)
    try:
        with torch.no_grad(), watch:
            root(*args, **kwargs)
    finally:
        restore_checkpoint()
        for h in handles:
            h.remove()
        for b, saved in zip(root.buffers(), buffers):
            b.detach().copy_(saved)
        torch.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
    batch = batch_of(args, kwargs)
    for i, layer in enumerate(layers):
        layer.used = i in watch.first_use
        layer.self_waited = layer.used and i not in watch.outside
        if layer.linear:
            layer.why_not_factors = _why_not_factors(i, rows, watch)
            layer.factorable = not layer.why_not_factors
        if i in rows:
            layer.rows_per_example = max(1, rows[i] // max(1, batch))
        # A lookup whose weight another module reads too (a tied LM head) has a dense gradient.
        if layer.lookup and i not in watch.foreign and i not in watch.outside:
            layer.rows_touched = int(torch.cat(ids[i]).unique().numel()) if i in ids else 0
    order = sorted(watch.first_use, key=watch.first_use.get)
    return order + [i for i in range(len(layers)) if i not in watch.first_use], batch



def agree(layers, order, batch, allgather):
    """What every rank's probe saw, merged into one plan that every rank holds: each rank
    probed its own first batch, whose shapes (batch size, sequence length, a branch taken or
    not) are data, not model, and may differ by rank. `allgather(bytes)` returns every
    rank's bytes. Returns (order, batch) as probe() does, with the layers' probe fields set
    to the merged figures:
      - order: rank 0's order of first use, then the layers only other ranks used, then
        the unused ones (an order for priorities only: any one works if all ranks hold it);
      - batch and factor rows per example: the largest any rank saw (the cost model's K);
      - a layer is waited for in its own forward when every rank that used it said so;
      - a Linear goes by factors when some rank ran it and every rank that ran it vouched
        for it (a rank whose batch does not reach it sends no factor rows).
    Ranks whose models differ (layer names or parameter shapes) keep their own figures:
    the session's start-up check then names the first difference."""
    mine = {"model": [[l.name, [list(p.shape) for _, p in l.params]] for l in layers],
            "order": [i for i in order if layers[i].used], "batch": int(batch),
            "layers": [[l.used, l.why_not_factors, l.rows_per_example, l.self_waited, l.rows_touched]
                       for l in layers]}
    ranks = [json.loads(b) for b in allgather(json.dumps(mine).encode())]
    if any(r["model"] != mine["model"] for r in ranks):
        return order, batch
    merged = []
    for r in ranks:
        merged += [i for i in r["order"] if i not in merged]
    merged += [i for i in range(len(layers)) if i not in merged]
    for i, layer in enumerate(layers):
        seen = [r["layers"][i] for r in ranks]
        users = [s for s in seen if s[0]]
        layer.used = bool(users)
        layer.self_waited = bool(users) and all(s[3] for s in users)
        layer.rows_per_example = max(s[2] for s in seen)
        # Row-sparse where every rank found it so; the cost model weighs the most rows any touched.
        layer.rows_touched = -1 if any(s[4] < 0 for s in seen) else max(s[4] for s in seen)
        if layer.linear:
            # A rank that used its parameters without running its forward saw a reason too.
            reasons = [s[1] for s in users if s[1]] or ([] if users else [seen[0][1]])
            layer.why_not_factors = reasons[0] if reasons else ""
            layer.factorable = not layer.why_not_factors
    return merged, max(r["batch"] for r in ranks)
