"""One iteration of a DistributedModel, as a mixin of it (model.py): the forward with its
waits and start-up, the end of backward (gradient mode's mean in .grad, the .grad watch's
window), accumulation passes and no_sync(), and optimizer.step() ending the iteration (the
servers' step values, the local step in gradient mode)."""
import contextlib
import weakref

import torch

from . import checkpoint
from .grad_watch import GradReads


class Iteration:
    """The iteration's methods of DistributedModel; its state (the core, the pass count, the
    mode, ...) is the model's, set up in DistributedModel.__init__."""

    def forward(self, *args, **kwargs):
        # Poseidon's bookkeeping runs outside torch.compile's graphs (a wrapper compiled as a
        # whole keeps the module's forward in one graph, as DDP's does), the module's inside.
        training, passes_before = self._before_forward(args, kwargs)
        try:
            out = (self._compiled or self.module)(*args, **kwargs)
        except BaseException:
            self._forward_failed(passes_before)
            raise
        self._after_forward(out, training, args, kwargs)
        return out

    @torch.compiler.disable
    def _before_forward(self, args, kwargs):
        """Everything before the module's forward: start, checkpoints due, the iteration's
        count and mode, the layers' waits. Returns (training, passes before this one)."""
        if self._core is None:
            if self._original is None:
                raise RuntimeError("this DistributedModel has been closed")
            self._start(args, kwargs)
        if self._checkpoints.pending:  # due at the last step; the loop has finished that step
            self._decide_when_due()  # a checkpoint holds the mode the run goes on in
            self._checkpoints.flush(self._core, checkpoint.config_of(self, self._core), self._own_state(),
                                    self._saved_mode())
        training = torch.is_grad_enabled() and self.module.training
        if training:
            self._close_grad_window()
        if training and self._synchronized:
            # The last iteration's gradients were synced and no optimizer.step() came: a
            # GradScaler skips it when the mean gradients hold inf or NaN (the same on every
            # rank), and the loop cleared them. The iteration still counts. Gradients still
            # there mean a second backward pass for one step that was not declared.
            if any(p.grad is not None and bool(p.grad.any()) for p in self._grad_checked):
                raise ValueError("a training forward after this iteration's gradients were synced, without "
                                 "optimizer.step() or zero_grad(): to accumulate k backward passes per step pass "
                                 "backward_passes_per_step=k to DistributedModel")
            self._synchronized = False
            self._count_step()
        if training:
            self._decide_when_due()
        if training and args and isinstance(args[0], torch.Tensor) and args[0].dim() > 0:
            self._batch = args[0].size(0)  # a profile's batch (write_profile): a training forward's
        if training and self.mode == "server":
            self._send_step_values()
        passes_before = self._passes
        if training:
            self._count_pass()
        try:
            self._core.begin_forward(training, self._in_no_sync)
        except BaseException:
            self._passes = passes_before
            raise
        return training, passes_before

    @torch.compiler.disable
    def _forward_failed(self, passes_before):
        self._core.abort_forward()  # not a pass: the next forward may come
        self._passes = passes_before

    @torch.compiler.disable
    def _after_forward(self, out, training, args, kwargs):
        self._core.end_forward()
        if training and self._passes == 0 and (self.mode == "gradient" or self._watches()):
            self._at_backward_end(out, args, kwargs)

    def _at_backward_end(self, out, args, kwargs):
        """The iteration's last pass: when the backward through `out` ends, gradient mode's
        .grad holds the workers' mean, as under DDP, so that clipping or any read of .grad
        between backward() and step() sees the mean (Horovod's optimizer.synchronize() done
        for the loop); a model that watches reads of .grad opens its window (GradReads). A
        backward that never reaches `out` leaves the mean to step()."""
        inputs = {id(t.grad_fn) for t in _tensors_of((args, kwargs)) if t.grad_fn is not None}
        roots = [t.grad_fn for t in _tensors_of(out) if t.grad_fn is not None and id(t.grad_fn) not in inputs]
        if not roots:
            return
        me = weakref.ref(self)
        queued = []

        def at_backward_start(grad_outputs):
            model = me()
            # Only a backward that accumulates into the parameters' .grad (not autograd.grad
            # towards the inputs, as a gradient penalty takes).
            if model is None or not any(torch._C._will_engine_execute_node(a) for a in model._accumulators):
                return None
            if queued:
                if model._synchronized:
                    raise RuntimeError("a second backward through this forward's output after its gradients were "
                                       "synced: one backward per optimizer.step() (add the losses first), or "
                                       "backward_passes_per_step=k with a forward per pass")
                return None
            queued.append(True)  # once per backward, whichever output it starts from
            torch.autograd.Variable._execution_engine.queue_callback(
                lambda: me() is not None and me()._backward_done())
            return None

        for node in roots:
            node.register_prehook(at_backward_start)

    def _backward_done(self):
        if self._core is None:
            return
        if self.mode == "gradient" and not self._synchronized:
            self._core.step()
            self._synchronized = True
        if self._watches():
            self._watched = [p for p in self.module.parameters()]
            GradReads.open(self, self._watched)

    @contextlib.contextmanager
    def no_sync(self):
        """As DDP's no_sync(): the backward passes inside only accumulate into .grad; the
        first pass after it syncs them all. Poseidon sizes an iteration up front, so pass
        backward_passes_per_step=k (k - 1 passes inside no_sync(), the last outside)."""
        outer, self._in_no_sync = self._in_no_sync, True
        try:
            yield
        finally:
            self._in_no_sync = outer  # nested: as the outer one left it (DDP's too)

    def _count_pass(self):
        k = self.options.backward_passes_per_step
        last = self._passes + 1 == k
        if self._in_no_sync and (k == 1 or last):
            raise ValueError(f"model.no_sync(): this would be training pass {self._passes + 1} of an iteration of "
                             f"backward_passes_per_step={k}, which must sync; pass "
                             "backward_passes_per_step=k to DistributedModel (k - 1 passes inside no_sync(), the "
                             "last outside)")
        if not self._in_no_sync and not last and self._passes + 1 < k and self._used_no_sync:
            raise ValueError(f"a training pass outside model.no_sync() before the last of backward_passes_per_step={k}")
        self._used_no_sync = self._used_no_sync or self._in_no_sync
        self._passes = 0 if last else self._passes + 1

    def _optimizer_step(self, closure=None):
        loss = None
        if closure is not None:  # as torch's optimizers: the closure's forward and backward first, then the step
            with torch.enable_grad():
                loss = closure()
        if self._core is None:
            raise RuntimeError("optimizer.step() before the model's first forward")
        if self._synchronized:
            self._synchronized = False  # synchronize_gradients() already ended the iteration
            result = self._local_step()
        else:
            result = self._end_iteration()
        self._stepped = True
        self._count_step()
        return loss if closure is not None else result

    def _local_step(self):
        self._own_reads = True
        try:
            return self._original[0]()
        finally:
            self._own_reads = False

    def _count_step(self):
        self.iteration += 1
        if self._checkpoints.due(self.iteration):
            self._checkpoints.mark(self.iteration)

    def _step_values(self):
        """(lr, momentum, weight_decay) the optimizer holds now, the same for every group."""
        groups = self.optimizer.param_groups
        values = [tuple(float(g[k]) for k in ("lr", "momentum", "weight_decay")) for g in groups]
        if any(v != values[0] for v in values):
            raise ValueError("the optimizer's parameter groups now differ in lr, momentum or weight_decay: server-side "
                             "SGD applies one set to every parameter; pass mode='gradient'")
        return values[0]

    def _send_step_values(self):
        """Server mode: the servers apply this iteration's update with the lr, momentum and
        weight decay the optimizer holds at its forward (a scheduler's, a warm-up's)."""
        values = self._step_values()
        if values == self._sent_values:
            return
        if self.options.lr_decay_iterations:
            raise ValueError("the optimizer's lr changed while lr_decay_iterations decays it on the servers: drop "
                             "lr_decay_iterations to schedule the lr yourself")
        if values[1] != 0 and self._sgd[1] == 0:
            raise ValueError("the optimizer's momentum changed from 0: the servers keep momentum only for a run begun "
                             "with it; start with the momentum non-zero or pass mode='gradient'")
        self._core.set_step_values(*values)
        self._sent_values = values

    def _end_iteration(self):
        if self.mode == "server" and self._step_values() != self._sent_values:
            raise ValueError("the optimizer's lr, momentum or weight_decay changed between this iteration's forward and "
                             "optimizer.step(): the servers apply the values the optimizer held at the forward; change "
                             "them before it (as a scheduler's step() after optimizer.step() does) or pass "
                             "mode='gradient'")
        self._core.step()
        if self.mode == "gradient":
            return self._local_step()
        return None


def _tensors_of(value):
    """The tensors in a forward's output (a tensor, or lists, tuples and dicts of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_of(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_of(v)]
    return []
