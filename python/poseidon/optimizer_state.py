"""The optimizer's state is the user's in every mode: optimizer.state_dict() returns what
it would hold under DDP, and load_state_dict() puts the state where the stepping happens.
In server mode SGD's momentum lives on the servers, SFB replicas and allreduce owners; this
mix-in of DistributedModel gathers it from there and seeds it back."""
import types

import torch


class OptimizerState:
    def _optimizer_state_to_servers(self, starting=False):
        """Server mode: the SGD momentum the user's optimizer holds (a first iteration stepped on
        the workers, a loaded state_dict) becomes the servers' and replicas' (each takes its
        slice); the optimizer keeps none. A parameter without a buffer starts from zeros,
        which is what SGD's first step does with it (the buffer becomes the gradient).
        `starting`: at the session's start, where every rank is here and agrees whether it
        holds a state (a mid-run load is the loading ranks' own, as under DDP)."""
        state = self.optimizer.state
        held = any("momentum_buffer" in state.get(p, {}) for layer in self._layers for _, p in layer.params)
        if starting and not self._core.all_agree(held) and not self._core.all_agree(not held):
            # Replicas seeded from different states would part: say how to share one.
            raise ValueError("the optimizer holds a momentum state on some ranks only (loaded on rank 0?): call "
                             "poseidon.broadcast_optimizer_state(optimizer, root_rank=0) before the first forward, "
                             "as Horovod's examples do")
        if self._sgd[1] != 0 and held:
            def buffer(p):
                b = state.get(p, {}).get("momentum_buffer")
                return b if b is not None else torch.zeros_like(p)
            self._core.seed_momentum([[buffer(p) for _, p in layer.params] for layer in self._layers])
        state.clear()

    def _own_state(self):
        """The optimizer's own state_dict and load_state_dict, for checkpoints, which keep the
        servers' momentum in the session's records."""
        return types.SimpleNamespace(state_dict=self._original[2], load_state_dict=self._original[3])

    def _optimizer_state(self):
        """optimizer.state_dict(): what it would hold under DDP. In server mode the servers
        hold SGD's momentum, each shard its pairs' and each allreduce owner its slices': this
        rank gathers it (the others' transport threads answer, so it may be called on rank 0
        alone, as DDP's and Horovod's examples save it) into the optimizer's own layout."""
        if self._core is None or self.mode != "server" or self._sgd[1] == 0:
            return self._original[2]()
        state = self.optimizer.state
        momentum = self._core.gather_momentum()  # after every layer's newest values: this step's
        try:
            for layer, buffers in zip(self._layers, momentum):
                for (_, p), b in zip(layer.params, buffers):
                    state[p]["momentum_buffer"] = b.to(device=p.device, dtype=p.dtype)
            return self._original[2]()
        finally:
            state.clear()

    def _load_optimizer_state(self, state):
        """optimizer.load_state_dict(): the optimizer's own; in server mode its momentum then
        goes where the stepping happens (every rank loads, as under DDP)."""
        result = self._original[3](state)
        if self._core is not None and self.mode == "server":
            self._core.synchronize()  # no sync in flight writes momentum while it is replaced
            self._optimizer_state_to_servers()
        return result
