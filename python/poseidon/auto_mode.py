"""Mode "auto": where the optimizer runs, decided by the first iteration. It runs in
gradient mode (exact, as DDP); from the second training forward on the model continues on
the servers when every rank's first iteration stepped torch.optim.SGD and no loop read
.grad between backward() and the next forward (grad_watch.py watches), else stays in
gradient mode for good. A mix-in of DistributedModel: the state it reads is the model's."""
from .grad_watch import GradReads, SERVER_MODELS
from .options import MODES, server_sgd


class AutoMode:
    def _choose_mode(self, mode, why_not, optimizer, server_only):
        """(the mode to start in, why) where it is fixed; ("gradient", None) for an "auto"
        whose first iteration decides."""
        if mode == "server" and self._sgd is None:
            raise ValueError(f"mode='server' runs SGD on the servers, but {why_not}; use mode='gradient'")
        if mode != "auto":
            chosen, why = mode, "as passed"
        elif self._sgd is None:
            chosen, why = "gradient", f"auto: {why_not}"
        elif server_only:
            chosen, why = "server", f"auto: {', '.join(server_only)} given (server mode's options)"
        elif self._checkpoints.saved and self._checkpoints.saved.get("mode") in MODES[1:]:
            chosen = self._checkpoints.saved["mode"]
            why = "auto: as the run whose checkpoint this one resumes"
        else:
            return "gradient", None
        if chosen == "server":
            # The servers update every trainable parameter: the optimizer must own them all.
            owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
            trainable = {id(p) for p in self.module.parameters() if p.requires_grad}
            if owned != trainable:
                raise ValueError("server-side SGD updates every trainable parameter of the module, but the optimizer "
                                 "holds other ones: freeze what it should not train (requires_grad_(False)) or use "
                                 "mode='gradient'")
        return chosen, why

    def _watches(self):
        return self._deciding or self.mode == "server"

    def _close_grad_window(self):
        if getattr(self, "_watched", None):
            GradReads.close(self._watched)
            self._watched = []

    def _grad_read(self, frame):
        """A read of .grad inside this model's window (GradReads), from `frame`."""
        if self._own_reads:
            return
        if self._deciding:
            self._grad_reader = self._grad_reader or GradReads.site(frame)
            return
        raise ValueError(f"{GradReads.site(frame)}: read .grad of a model in server mode between loss.backward() "
                         "and the next forward: the parameter servers take the gradients, so .grad never holds the "
                         "workers' mean (DDP's); pass mode='gradient' to DistributedModel" + self._auto_note())

    def _auto_note(self):
        if self.mode_reason and self.mode_reason.startswith("auto: the first iteration"):
            return (" (mode 'auto' chose server mode because no rank's first iteration read .grad; a loop that "
                    "reads it only at some steps must say mode='gradient')")
        return ""

    def _decide_when_due(self):
        if self._deciding and self.iteration > self.start_iteration:
            self._decide()

    def _decide(self):
        """The second training forward of an "auto" model (the first ran in gradient mode,
        exactly as DDP): every rank agrees whether to continue on the servers."""
        self._deciding = False
        why = self._why_not_servers()
        if not self._core.all_agree(why is None):
            why = why or "another rank's first iteration needs the workers' mean gradient (its describe() says why)"
            self.mode_reason = f"auto: {why}"
            return
        self._continue_on_servers()

    def _why_not_servers(self):
        """Why this rank's first iteration needs gradient mode for good, or None."""
        if self._grad_reader:
            return f"the loop read .grad between backward() and the next forward, at {self._grad_reader}"
        if not self._stepped:
            return "the first iteration ended without optimizer.step() (a GradScaler skipped it)"
        self._sgd, why_not = server_sgd(self.optimizer)
        if self._sgd is None:
            return why_not
        owned = {id(p) for g in self.optimizer.param_groups for p in g["params"]}
        if owned != {id(p) for layer in self._layers for _, p in layer.params}:
            return "the optimizer does not hold exactly the parameters the module trains (the servers update all)"
        if self._sgd[1] != 0 and any("momentum_buffer" not in self.optimizer.state.get(p, {})
                                     for layer in self._layers for _, p in layer.params):
            return "a parameter had no gradient in the first step (its momentum would start differently)"
        return None

    def _continue_on_servers(self):
        """Server mode from this forward on: a new session whose servers and replicas start
        from the parameters and SGD momentum the first, worker-side step left (equal on every
        rank: compared by digest, not broadcast again), at this iteration."""
        batch = self.options.batch
        self._core.synchronize()
        core, self._core = self._core, None
        for h in self._hooks:
            h.remove()
        self._hooks = []
        core.close()
        self.mode, self.mode_reason = "server", "auto: the first iteration read no .grad and stepped torch.optim.SGD"
        self._sent_values = self._sgd
        self.options = self._options(self._option_args)
        self.options.batch, self.options.start_iteration = batch, self.iteration
        self.options.replicas_equal = True  # the first session left them equal: no second broadcast
        self._open_core()  # which hands the optimizer's momentum to the servers
        # The first step's mean gradients go too: server mode's zero_grad() does nothing, so a
        # loop that zeroes between this forward and its backward would have them added in.
        for p in self.module.parameters():
            p.grad = None
        SERVER_MODELS.add(self)
