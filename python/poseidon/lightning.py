"""PyTorch Lightning on Poseidon: one argument to the Trainer, and mpirun to launch.

    from poseidon.lightning import PoseidonStrategy
    trainer = lightning.pytorch.Trainer(strategy=PoseidonStrategy(), accelerator="cpu", max_epochs=3)
    trainer.fit(model, train_loader)        # mpirun -np 4 python train.py

The ranks come from the MPI launch (no torchrun variables): every process is one rank, on the
GPU of its local rank with accelerator="gpu". The LightningModule is wrapped in a
DistributedModel with the optimizer configure_optimizers returns, so everything the Python API
does holds here: mode "auto" (the first step in gradient mode, exact as DDP; then on the
servers when the loop allows it: Lightning's gradient clipping reads .grad, so with
gradient_clip_val the optimizer stays on the workers), each scheme, the wire, checkpoints of
the optimizer's full state. The keywords of PoseidonStrategy are DistributedModel's.

What Lightning asks of a strategy, and what it gets:
  - training_step runs through the DistributedModel. Its first call probes the module: the
    step runs once more before it, under no_grad and with the random state and buffers put
    back, and with self.log muted; anything else the step changes (a counter, a torchmetrics
    metric it updates) changes twice on that first batch;
  - validation, test and predict steps run on the module itself (every rank holds the same
    parameters; nothing to synchronise);
  - accumulate_grad_batches: backward_passes_per_step, with Lightning's no-sync passes (the
    batches of an epoch must divide into its groups: refused at the start otherwise);
  - reduce/all_gather/broadcast/barrier (self.log(sync_dist=True), ModelCheckpoint, ...):
    Poseidon's collectives, each sum in rank order (the same on every rank);
  - checkpoints: Lightning's own (rank 0 writes; the optimizer's state gathered from the
    servers), resumed with Trainer.fit(ckpt_path=...).
One optimizer, automatic optimization, no sync_batchnorm; anything else stops with an error
saying so.
Lightning is optional: `import poseidon` never imports it.
"""
import contextlib
import inspect

import torch

try:
    from lightning.fabric.plugins.environments import ClusterEnvironment
    from lightning.fabric.utilities.optimizer import _optimizers_to_device
    from lightning.pytorch.strategies import ParallelStrategy
    from lightning.pytorch.trainer.states import TrainerFn
    from lightning.pytorch.utilities.rank_zero import rank_zero_only
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("poseidon.lightning needs PyTorch Lightning 2.x: pip install lightning") from e

from .broadcast import broadcast_object, broadcast_parameters
from . import collectives
from . import runtime
from .model import DistributedModel


class PoseidonEnvironment(ClusterEnvironment):
    """The ranks of the MPI launch, as Poseidon's runtime finds them (no address or port:
    Poseidon's transport connects the ranks itself)."""

    @property
    def creates_processes_externally(self):
        return True

    @property
    def main_address(self):
        return "localhost"

    @property
    def main_port(self):
        return 0

    @staticmethod
    def detect():
        return True

    def world_size(self):
        return runtime.size()

    def set_world_size(self, size):
        pass  # the launch decides

    def global_rank(self):
        return runtime.rank()

    def set_global_rank(self, rank):
        pass

    def local_rank(self):
        return runtime.local_rank()

    def node_rank(self):
        return runtime.rank() // max(1, runtime.local_size())


class PoseidonStrategy(ParallelStrategy):
    """Lightning's Trainer on Poseidon; `options` are DistributedModel's keywords (scheme,
    mode, wire, ...), checked here."""

    strategy_name = "poseidon"

    def __init__(self, accelerator=None, parallel_devices=None, checkpoint_io=None, precision_plugin=None, **options):
        inspect.signature(DistributedModel).bind_partial(None, None, **options)  # an unknown keyword: TypeError now
        runtime.init()  # the ranks: Lightning asks for them as soon as the Trainer is made
        rank_zero_only.rank = runtime.rank()  # Lightning's start-up messages on rank 0 only
        super().__init__(accelerator=accelerator, parallel_devices=parallel_devices,
                         cluster_environment=PoseidonEnvironment(), checkpoint_io=checkpoint_io,
                         precision_plugin=precision_plugin)
        self._options = options
        self._resumed_mode = None  # where a checkpoint's run had its optimizer (load_checkpoint)
        self.num_nodes = 1  # Lightning sets it from Trainer(num_nodes=); the launch decides

    @property
    def root_device(self):
        on_gpu = self.parallel_devices and self.parallel_devices[0].type == "cuda"
        return torch.device("cuda", runtime.local_rank() % torch.cuda.device_count()) if on_gpu else torch.device("cpu")

    @property
    def is_distributed(self):
        return True  # Lightning then gives each rank its part of the data (a DistributedSampler)

    @property
    def distributed_sampler_kwargs(self):
        return {"num_replicas": self.world_size, "rank": self.global_rank}

    def set_world_ranks(self):
        rank_zero_only.rank = self.global_rank  # Lightning's rank-zero prints and files

    def setup_environment(self):
        self.set_world_ranks()
        super().setup_environment()

    def setup(self, trainer):
        self.accelerator.setup(trainer)
        self.model = self.precision_plugin.convert_module(self.model)
        self.model_to_device()
        # Rank 0's parameters on every rank now, as after DDP's wrap: fitting's sanity check and
        # validate/test run the module before DistributedModel's own start (its first training step).
        broadcast_parameters(self.lightning_module.state_dict(), root_rank=0)
        fitting = trainer.state.fn == TrainerFn.FITTING
        if fitting:
            self.setup_optimizers(trainer)
            self.model = self._distributed(trainer)
        self.setup_precision_plugin()
        if fitting:
            _optimizers_to_device(self.optimizers, self.root_device)

    def _distributed(self, trainer):
        module = self.lightning_module
        if not module.automatic_optimization:
            raise ValueError("PoseidonStrategy trains with Lightning's automatic optimization; manual optimization "
                             "(self.automatic_optimization = False) is not supported")
        if len(self.optimizers) != 1:
            raise ValueError(f"PoseidonStrategy trains with one optimizer; configure_optimizers returned "
                             f"{len(self.optimizers)}")
        if self._layer_sync is not None:
            raise ValueError("PoseidonStrategy: Trainer(sync_batchnorm=True) is not supported; BatchNorm's buffers "
                             "follow DistributedModel's buffers option ('broadcast', as DDP, or 'average')")
        passes = self._options.get("backward_passes_per_step", trainer.accumulate_grad_batches)
        if passes != trainer.accumulate_grad_batches or any(
                type(c).__name__ == "GradientAccumulationScheduler" for c in trainer.callbacks):
            raise ValueError("PoseidonStrategy takes its backward passes per step from Trainer(accumulate_grad_batches="
                             "N), fixed for the run: drop backward_passes_per_step and GradientAccumulationScheduler")
        options = dict(self._options)
        if self._resumed_mode and options.get("mode", "auto") == "auto":
            options["mode"] = self._resumed_mode  # the saved run's decision: the resumed steps are its steps
        options.setdefault("backward_passes_per_step", trainer.accumulate_grad_batches)
        options.setdefault("name", type(module).__name__)
        return DistributedModel(module, self.optimizers[0], **options)

    def on_train_start(self):
        """A DistributedModel's iteration is accumulate_grad_batches passes, every one: Lightning
        steps early at an epoch's end when the batches do not divide, which it cannot follow."""
        trainer = self.lightning_module.trainer
        passes, batches = trainer.accumulate_grad_batches, trainer.num_training_batches
        if passes > 1 and batches != float("inf") and batches % passes:
            raise ValueError(f"PoseidonStrategy: {batches} training batches per epoch do not split into groups of "
                             f"accumulate_grad_batches={passes} (Lightning would step early on the last group): make "
                             f"the batches per epoch a multiple of it (limit_train_batches, the batch size, drop_last)")
        super().on_train_start()

    def model_to_device(self):
        self.model.to(self.root_device)

    # --- the steps ---

    def training_step(self, *args, **kwargs):
        with self.precision_plugin.train_step_context(), _as_forward(self.model, self.lightning_module):
            return self.model(*args, **kwargs)

    def validation_step(self, *args, **kwargs):
        self._synchronize()
        with self.precision_plugin.val_step_context():
            return self.lightning_module.validation_step(*args, **kwargs)

    def test_step(self, *args, **kwargs):
        self._synchronize()
        with self.precision_plugin.test_step_context():
            return self.lightning_module.test_step(*args, **kwargs)

    def predict_step(self, *args, **kwargs):
        self._synchronize()
        with self.precision_plugin.predict_step_context():
            return self.lightning_module.predict_step(*args, **kwargs)

    def _synchronize(self):
        """Every layer's new values in place before the module runs outside the wrapper
        (they already are unless overlap_step=True)."""
        if isinstance(self.model, DistributedModel) and self.model.is_open() and self.model.iteration > 0:
            self.model.synchronize()

    @contextlib.contextmanager
    def block_backward_sync(self):
        if isinstance(self.model, DistributedModel):
            with self.model.no_sync():
                yield
        else:
            yield

    # --- Lightning's collectives, on Poseidon's ---

    def reduce(self, tensor, group=None, reduce_op="mean"):
        if not isinstance(tensor, torch.Tensor):
            return tensor
        op = _op_name(reduce_op)
        every = collectives.allgather(tensor.detach().unsqueeze(0))  # [ranks, ...], in rank order
        if op in ("max", "min"):
            return (every.amax(0) if op == "max" else every.amin(0)).to(tensor.dtype)
        total = every[0].clone()
        for part in every[1:]:  # rank order: the same sum on every rank
            total += part
        return total / len(every) if op in ("mean", "avg") else total

    def all_gather(self, tensor, group=None, sync_grads=False):
        if sync_grads:
            raise ValueError("PoseidonStrategy.all_gather: sync_grads=True (a gather autograd flows back through) "
                             "is not supported")
        return collectives.allgather(tensor.detach().unsqueeze(0))

    def broadcast(self, obj, src=0):
        return broadcast_object(obj, root_rank=src)

    def barrier(self, name=None):
        collectives.barrier()

    # --- checkpoints: Lightning's, with where the optimizer ran ---

    def save_checkpoint(self, checkpoint, filepath, storage_options=None):
        if isinstance(self.model, DistributedModel):
            checkpoint["poseidon"] = {"mode": self.model._saved_mode()}
        super().save_checkpoint(checkpoint, filepath, storage_options=storage_options)

    def load_checkpoint(self, checkpoint_path, weights_only=None):
        checkpoint = super().load_checkpoint(checkpoint_path, weights_only=weights_only)
        self._resumed_mode = checkpoint.get("poseidon", {}).get("mode")
        return checkpoint

    def teardown(self):
        if isinstance(self.model, DistributedModel):
            self.model.close()  # during an exception it returns at once (the job is ending)
            self.model = self.lightning_module
        super().teardown()


def _op_name(reduce_op):
    """"sum", "mean", "max", ... from Lightning's reduce_op (a word, None for a sum, or
    torch.distributed.ReduceOp)."""
    if reduce_op is None:
        return "sum"
    name = str(reduce_op).split(".")[-1].lower()
    if name not in ("sum", "mean", "avg", "max", "min"):
        raise ValueError(f"PoseidonStrategy.reduce: reduce_op={reduce_op!r}: use sum, mean, max or min")
    return name


@contextlib.contextmanager
def _as_forward(model, module):
    """module.forward is its training_step while the wrapper's forward runs it, and the
    module's own forward inside the step (its self(x)). Lightning's own redirection restores
    forward at its first call, which here is the probe's. self.log and self.log_dict are
    muted while the first forward's probe runs the step under no_grad."""
    def forward(*args, **kwargs):
        del module.forward
        try:
            if getattr(model, "probing", False):
                with _muted_logging(module):
                    return module.training_step(*args, **kwargs)
            return module.training_step(*args, **kwargs)
        finally:
            module.forward = forward

    module.forward = forward
    try:
        yield
    finally:
        del module.forward  # the class's forward again


@contextlib.contextmanager
def _muted_logging(module):
    module.log = module.log_dict = lambda *args, **kwargs: None
    try:
        yield
    finally:
        del module.log, module.log_dict
