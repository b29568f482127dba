"""torch.compile(module) before wrapping, as PyTorch's docs show for DDP: Poseidon probes,
hooks and names the eager module and runs the compiled one's forward."""
import torch


def compiled_parts(module):
    """(the eager module, the compiled one or None) of what torch.compile returned, or of a
    plain module. The compiled one is kept out of the wrapper's submodules (one copy of every
    name in its state_dict)."""
    if type(module).__name__ == "OptimizedModule" and isinstance(getattr(module, "_orig_mod", None), torch.nn.Module):
        return module._orig_mod, Compiled(module)
    return module, None


class Compiled:
    """A compiled module's forward, held outside torch.nn.Module's registry."""

    def __init__(self, compiled):
        self.compiled = compiled

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)
