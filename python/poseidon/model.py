"""DistributedModel: any torch.nn.Module trained data-parallel under Poseidon.

    model = poseidon.DistributedModel(net, optimizer)   # the user's torch.optim optimizer
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()          # each layer's sync starts as autograd finishes it (WFBP)
        optimizer.step()         # ends the iteration (see "Where the optimizer runs")
        optimizer.zero_grad()

The first forward probes the model (layers.py) and starts the session, on every rank
together: rank 0's parameters, buffers and frozen tensors are broadcast, and ranks that
wrap different models or options stop with one error.

Where the optimizer runs (`mode`):
  - "server": the paper's design. The parameter servers, SFB and allreduce replicas apply
    SGD with momentum and weight decay; optimizer.step() only ends the iteration and the
    next forward waits for each layer as it reaches it. Needs torch.optim.SGD with one
    lr/momentum/weight_decay for all parameters, no nesterov, no dampening, and a fixed lr.
  - "gradient": every scheme delivers the workers' mean gradient into .grad and the
    user's optimizer steps locally, identically on every rank (Adam, schedulers, clipping).
  - "auto" (default): decided by the first iteration, which runs in gradient mode (exact, as
    DDP). "server" from the second training forward on when the optimizer allows it and no
    rank's loop read .grad between backward() and the next forward (clipping, a GradScaler,
    a norm logged): every later iteration is then the same loop. Else "gradient" for good.
    describe() says which and why. Options only the servers have (staleness,
    straggler_timeout, lr_decay_iterations, overlap_step) choose "server" up front.
The optimizer's step(), zero_grad(), state_dict() and load_state_dict() are replaced on the
object passed in (in server mode Poseidon clears each gradient after its sync, and the
optimizer's state, SGD's momentum, lives on the servers: state_dict() gathers it, from rank 0
alone if need be, and load_state_dict() hands it back to them).

Inputs may differ by rank and by step (batch sizes, sequence lengths, offsets), and so may
the layers a forward uses: a layer some rank used gets the mean over all ranks (the others
contribute zeros), one no rank used keeps .grad None and is not stepped (DDP's
find_unused_parameters=True). torch.compile works either side of the wrapper.

Checkpoints (checkpoint.py): checkpoint_dir=D with checkpoint_every=N saves the whole job
every N steps (model.save_checkpoint() saves now); resume=True continues from D's newest one:
    model = poseidon.DistributedModel(net, optimizer, checkpoint_dir="ckpt", checkpoint_every=500,
                                      resume=os.path.exists("ckpt/LATEST"), checkpoint_objects=[scheduler])
    for it in range(model.start_iteration, iterations): ...

In gradient mode loss.backward() returns with the workers' mean gradient in .grad, as under
DDP: clip or read it before optimizer.step() as usual (model.synchronize_gradients(), as
Horovod's optimizer.synchronize(), does the same for a backward that did not pass through the
model's output). In server mode .grad never holds the mean: a read of it between backward()
and the next forward (clipping, a GradScaler's unscale, a norm) stops with an error naming
mode='gradient'.
"""
import sys
import textwrap
import types
import weakref

import torch

from . import _C
from . import checkpoint
from . import layers as layers_mod
from . import runtime
from .auto_mode import AutoMode
from .compiled import compiled_parts
from .grad_watch import GradReads, SERVER_MODELS
from .iteration import Iteration
from .optimizer_state import OptimizerState
from .options import (MODES, SCHEMES, SERVER_ONLY, check_choice, core_options, keyword_values, keywords_doc, rate,
                      server_sgd, with_keywords)

_REPLACED = ("step", "zero_grad", "state_dict", "load_state_dict")  # the optimizer's methods a model replaces


class DistributedModel(AutoMode, OptimizerState, Iteration, torch.nn.Module):
    """Wraps `module` (any torch.nn.Module) for data-parallel training; see the module text.

    optimizer: the torch.optim optimizer of module's parameters.
    mode: where the optimizer runs: "auto", "server" or "gradient" (the module text says how
        "auto" decides).
    name: the model's name in messages and traces (default: the module's class name).
    profile, stack_rate: cost_model="schedule"'s inputs: the file an earlier run's
        write_profile() wrote, and the bytes communication moves per CPU second (e.g.
        "500MB") where ranks share a host's cores, to bound each simulated iteration by them.
    checkpoint_dir, checkpoint_every: save the whole job in this folder every N steps.
    resume: True (from checkpoint_dir) or a folder: continue from its newest checkpoint;
        model.start_iteration says where.
    checkpoint_objects: more objects with state_dict()/load_state_dict() to save and restore
        (LR schedulers, ...); the optimizer and torch's random state always are.

    The other keywords are the core's options, one table for Python and the CLI (its flags:
    `poseidon train --help`); the scheme "factor-push" is the CLI's alone:

{options}
    """

    @with_keywords
    def __init__(self, module, optimizer, *, name=None, mode="auto", profile=None, stack_rate=0, checkpoint_dir=None,
                 checkpoint_every=0, resume=False, checkpoint_objects=(), **options):
        super().__init__()
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"DistributedModel wraps a torch.nn.Module, not {type(module).__name__}")
        if isinstance(module, DistributedModel) or getattr(module, "_poseidon_wrapped", False):
            raise ValueError("this module is already wrapped by poseidon.DistributedModel; wrap it once")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("pass the module's torch.optim optimizer: poseidon.DistributedModel(model, optimizer)")
        options = keyword_values(options, "DistributedModel")
        # What only Python offers or takes; the options themselves are the core's to check
        # (_C.validate_options, in _options).
        check_choice("scheme", options["scheme"], SCHEMES)
        check_choice("mode", mode, MODES)
        if options["cost_model"] != "schedule" and (profile is not None or rate(stack_rate, "stack_rate")):
            raise ValueError('profile and stack_rate are the inputs of cost_model="schedule": add it, or drop them')
        self._runtime = runtime.runtime()
        # torch.compile(module) first, as PyTorch's docs show for DDP: Poseidon probes, hooks
        # and names the eager module and runs the compiled one's forward (no hook inside it).
        self.module, self._compiled = compiled_parts(module)
        self.optimizer = optimizer
        self.name = name or type(module).__name__
        self._layers = layers_mod.find_layers(module)
        if not self._layers:
            raise ValueError(f"model '{self.name}' has no trainable parameters: nothing to train data-parallel")
        self._checkpoints = checkpoint.Checkpoints(checkpoint_dir, checkpoint_every, resume, checkpoint_objects,
                                                   self._runtime)
        # (lr, momentum, weight_decay) when the servers can run the optimizer, else None.
        self._sgd, why_not = server_sgd(optimizer)
        self._sent_values = self._sgd  # the values the servers apply now (server mode)
        server_only = [k for k in SERVER_ONLY if options[k]]
        self.mode, self.mode_reason = self._choose_mode(mode, why_not, optimizer, server_only)
        self._deciding = self.mode_reason is None  # mode "auto": the first iteration decides (_decide)
        self.start_iteration = self._checkpoints.start_iteration  # where this run's training begins
        # More objects to checkpoint (schedulers made after the model): extend before the first forward.
        self.checkpoint_objects = self._checkpoints.objects
        self.iteration = self.start_iteration  # optimizer steps done, the resumed ones included
        self.options = self._options(dict(options, profile=profile, stack_rate=stack_rate))
        self.options.start_iteration = self.start_iteration
        self._core = None
        self._hooks = []
        runtime.register(self)
        self._synchronized = False  # synchronize_gradients() has ended this iteration
        self.probing = False  # the first forward's probe is running the module (under no_grad)
        self._accumulators, self._grad_checked = [], []  # made at the first forward (_start)
        self._in_no_sync = False  # inside no_sync(): a pass that only accumulates
        self._used_no_sync = False  # the loop accumulates with no_sync()
        self._passes = 0  # training forwards since the last step
        self._grad_reader = None  # deciding: where the loop first read .grad in the window
        self._own_reads = False  # Poseidon's own step reads .grad: not the loop's reads
        self._stepped = False  # deciding: the first iteration ended with optimizer.step()
        self._watched = []  # the parameters whose .grad reads a window watches now
        self._param_ids = {id(p) for p in module.parameters()}
        self._original = (optimizer.step, optimizer.zero_grad, optimizer.state_dict, optimizer.load_state_dict)
        self._own = {k: optimizer.__dict__[k] for k in _REPLACED if k in optimizer.__dict__}
        # Bound to the optimizer, as LibTorch's schedulers expect of optimizer.step; the
        # model is reached through a weak reference (no cycle keeps it alive).
        me = weakref.ref(self)
        def step(opt, closure=None):
            opt._opt_called = True  # as a scheduler's own wrapper marks it (its order check)
            return me()._optimizer_step(closure)

        # A scheduler made before the model wrapped the old step and checks, at its first step,
        # that optimizer.step still carries its mark: this one counts the calls for it.
        step._wrapped_by_lr_sched = True
        optimizer.step = types.MethodType(step, optimizer)
        optimizer.zero_grad = types.MethodType(lambda opt, set_to_none=True: me()._zero_grad(set_to_none),
                                               optimizer)
        optimizer.state_dict = types.MethodType(lambda opt: me()._optimizer_state(), optimizer)
        optimizer.load_state_dict = types.MethodType(lambda opt, state: me()._load_optimizer_state(state), optimizer)
        module._poseidon_wrapped = True
        if self.mode == "server":
            SERVER_MODELS.add(self)
        if self.mode == "server" or self._deciding:
            GradReads.install()

    # --- set-up ---

    def _options(self, a):
        self._option_args = a  # again when mode "auto" moves to the servers
        if self._deciding:  # what the servers would be given is checked now, not at the second forward
            core_options(a, "server", self._sgd)
        return core_options(a, self.mode, self._sgd)

    def _start(self, args, kwargs):
        """The first forward: probe, then start the session on every rank."""
        self.probing = True  # a wrapper around this model may mute the forward's side effects meanwhile
        try:
            order, batch = layers_mod.probe(self.module, self._layers, args, kwargs)
        finally:
            self.probing = False
        if self._compiled is not None:
            layers_mod.outside_compiled_forward(self._layers)
        with _C.Collectives(self._runtime, self.options.timeout.total_seconds()) as job:  # one plan for all
            order, batch = layers_mod.agree(self._layers, order, batch, job.allgather_bytes)
        # The rows touched are the first batch's: a resumed run takes the saving run's, so that
        # its plan (sparse rows or not) is the one its checkpoint was written under.
        saved_rows = self._checkpoints.saved_rows_touched()
        for layer in self._layers:
            if layer.rows_touched >= 0:
                layer.rows_touched = saved_rows.get(layer.name, layer.rows_touched)
        self._checkpoints.rows_touched = {l.name: l.rows_touched for l in self._layers if l.rows_touched >= 0}
        self._layers = [self._layers[i] for i in order]
        self.options.batch = int(batch) * self.options.backward_passes_per_step
        self._open_core()
        try:
            self._checkpoints.restore(self._core, checkpoint.config_of(self, self._core), self._own_state())
        except BaseException:
            self.close()  # not half-open: no training from weights that were never restored
            raise

    def _open_core(self):
        """The session over the probed layers, with self.options, and its hooks."""
        core_layers = []
        for layer in self._layers:
            c = _C.Layer()
            c.name, c.kind, c.params = layer.name, layer.kind, list(layer.params)
            c.M, c.N, c.factorable, c.rows_per_example = layer.M, layer.N, layer.factorable, layer.rows_per_example
            c.rows_touched = max(0, layer.rows_touched)
            core_layers.append(c)
        trainable = {id(p) for layer in self._layers for _, p in layer.params}
        frozen = [(n, p) for n, p in self.module.named_parameters() if id(p) not in trainable]
        self._core = _C.Model(self._runtime, self.name, core_layers, list(self.module.named_buffers()), frozen,
                              list(self.module.parameters()),
                              [i for i, layer in enumerate(self._layers) if layer.self_waited], self.options)
        self._install_hooks()
        if self.mode == "server" and not self._deciding:
            self._optimizer_state_to_servers(starting=True)
        # The gradient accumulators of the parameters autograd trains (SFB weights excepted):
        # whether a backward writes .grad (_mean_after_backward), and what a skipped step left.
        trained = [p for p in self.module.parameters() if p.requires_grad]
        with torch.enable_grad():
            self._accumulators = [p.view_as(p).grad_fn.next_functions[0][0] for p in trained]
        self._grad_checked = trained

    def _install_hooks(self):
        core = self._core
        for i, layer in enumerate(self._layers):
            if layer.self_waited:
                self._hooks.append(layer.module.register_forward_pre_hook(lambda m, inputs, i=i: core.wait_layer(i)))
            if core.uses_factors(i):
                def capture(m, inputs, output, i=i, name=layer.name):
                    if torch.is_grad_enabled() and core.factors_wanted(i):
                        if _in_backward():
                            raise RuntimeError(
                                f"layer '{name}' ran its forward during backward (a recomputation the first forward "
                                "did not show: not torch.utils.checkpoint, which Poseidon sees): its sufficient "
                                "factors would be taken twice; use scheme='ps'")
                        return core.capture_factors(i, inputs[0], output)
                    return None
                self._hooks.append(layer.module.register_forward_hook(capture))
            if self.options.timeline:  # each layer's forward time, for write_profile
                self._hooks.append(layer.module.register_forward_hook(lambda m, inputs, output, i=i: core.mark_forward(i)))

    def save_checkpoint(self):
        """Saves the whole job now, after self.iteration steps (all ranks together); call it
        where the loop has finished a step (after the scheduler's step, before the next draw)."""
        self._started()
        self._checkpoints.pending = None
        self._decide_when_due()
        self._checkpoints.save(self._core, self.iteration, checkpoint.config_of(self, self._core), self._own_state(),
                               self._saved_mode())

    def _saved_mode(self):
        """What a resumed "auto" run starts in: this mode, or "auto" while it is undecided (a
        checkpoint of iteration 0; after a step the decision comes before a save)."""
        return "auto" if self._deciding else self.mode

    def synchronize_gradients(self):
        """Gradient mode: ends the iteration now and waits until every .grad holds the
        workers' mean, so that it can be read or changed (clipping) before optimizer.step().
        With a GradScaler, call it between scaler.scale(loss).backward() and
        scaler.step(optimizer): the scaler then unscales and checks the mean gradients, the
        same on every rank."""
        if self.mode != "gradient":
            raise ValueError("synchronize_gradients() is for gradient mode: in server mode the servers apply the "
                             "gradients themselves (use mode='gradient' to clip them)" + self._auto_note())
        if self._core is None:
            raise RuntimeError("synchronize_gradients() before the model's first forward")
        if self._deciding:
            self._grad_reader = self._grad_reader or "model.synchronize_gradients()"
        if not self._synchronized:
            self._core.step()
            self._synchronized = True

    def zero_grad(self, set_to_none=True):
        """As optimizer.zero_grad(): nothing in server mode (step() has dropped .grad on host
        tensors; each sync clears the gradients it took)."""
        self._zero_grad(set_to_none)

    def _zero_grad(self, set_to_none=True):
        # Server mode: step() has dropped .grad (host tensors) and each sync clears the
        # gradients it took; zeroing them here could race with a sync still reading them.
        self._close_grad_window()
        if self.mode == "gradient":
            self._original[1](set_to_none=set_to_none)
            if self._synchronized:  # synced, no step (a GradScaler skipped it): the iteration counts
                self._synchronized = False
                self._count_step()

    def synchronize(self):
        """Waits until every layer holds the latest parameters and the buffers are equal. Read
        parameters (state_dict, an average of weights, norms) after it: between step() and the
        next forward a layer may still hold the last iteration's values or, on a GPU, be in
        the middle of its update."""
        if self._core is not None:
            self._core.synchronize()

    def digest(self):
        """Hex digest of every parameter and buffer; equal on every rank after synchronize()."""
        self._started()
        return self._core.digest()

    def plan(self):
        """Per layer: the scheme chosen, why, and the bytes this rank has sent for it."""
        self._started()
        return self._core.plan()

    def write_profile(self, path, batch=None):
        """Rank 0 writes a compute profile of its training so far (needs timeline=True): per
        layer the median forward and backward milliseconds and the layer's shapes, for
        `poseidon simulate --profile PATH`. batch: examples per training forward on this
        rank (default: the last training forward's first input's first dimension)."""
        self._started()
        batch = batch if batch is not None else getattr(self, "_batch", 0)
        self._core.write_profile(str(path), int(batch))

    def write_timeline(self, path):
        """Every rank's work so far as one Chrome trace (needs timeline=True), which rank 0
        writes to `path`: per layer the forward and backward on the compute thread, its
        sends, receives and applies, the engine's copies, collectives and steps (open it in
        https://ui.perfetto.dev). Every rank calls it (it gathers from all)."""
        self._started()
        self._core.write_timeline(str(path), self.name)

    def describe(self):
        """What the probe and the coordinator decided, one line per layer: its kind and
        scheme, where the forward waits for it (inside its own module's forward, overlapping
        the syncs of the layers after it, or before the whole forward when its parameters
        are read elsewhere), for a Linear not sent by factors, why not, and for an embedding
        whose gradient touches only its batch's rows, how many and what sparse rows cost."""
        self._started()
        plans = self._core.plan()
        why = self.mode_reason or "auto: the first iteration decides; gradient mode until then"
        lines = [f"{self.name}: {len(self._layers)} layers, mode={self.mode} ({why}), scheme={self.options.scheme}, "
                 f"{self._core.workers()} workers"]
        for layer, plan in zip(self._layers, plans):
            where = "in its forward" if layer.self_waited else "before the forward"
            line = f"  {layer.name:32s} {layer.kind:5s} {plan['scheme']:9s} waits {where}"
            if layer.why_not_factors:
                line += f"; no factors: {layer.why_not_factors}"
            if layer.rows_touched >= 0:
                line += f"; sparse rows: {layer.rows_touched} of {layer.params[0][1].shape[0]} touched ({plan['reason']})"
            lines.append(line)
        return "\n".join(lines)

    def bytes_sent(self):
        self._started()
        return self._core.bytes_sent()

    def close(self):
        """Waits for the other ranks and ends the session; gives the module its hooks and the
        optimizer its methods back (also when the session ends with an error). Called while
        an exception is on its way up (a `finally:` or `except:` block), it returns at once:
        the other ranks are not waited for, and a checkpoint not yet written is not written."""
        failing = sys.exc_info()[0] is not None
        if failing and self._core is not None:
            runtime.let_the_direct_witness_speak(sys.exc_info()[1])  # before the others hear we leave
        self._close_grad_window()
        try:
            if self._core is not None:
                try:
                    if not failing and self._checkpoints.pending:
                        self._decide_when_due()
                        self._checkpoints.flush(self._core, checkpoint.config_of(self, self._core), self._own_state(),
                                                self._saved_mode())
                finally:
                    core, self._core = self._core, None
                    core.close(abandon=failing)
        finally:
            for h in self._hooks:
                h.remove()
            self._hooks = []
            if self._original is not None:
                for k in _REPLACED:  # as they were: the class's, or the object's own
                    if k in self._own:
                        setattr(self.optimizer, k, self._own[k])
                    else:
                        delattr(self.optimizer, k)
                self._original = None
                self.module._poseidon_wrapped = False

    def is_open(self):
        return self._original is not None

    def _started(self):
        if self._core is None:
            raise RuntimeError("the model has not run a forward yet (the session starts with the first one)")


if DistributedModel.__doc__:  # None under python -OO
    DistributedModel.__doc__ = DistributedModel.__doc__.format(options=textwrap.indent(keywords_doc(), "    "))


def _in_backward():
    """Whether autograd's engine is running a backward pass on this thread."""
    current = getattr(torch._C, "_current_graph_task_id", None)
    return current is not None and current() != -1

