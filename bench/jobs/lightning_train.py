#!/usr/bin/env python3
"""The rank side of bench/features/lightning_vs_ddp.py: fcnet or convnet (as
bench/jobs/fcnet_python.py builds them) on synthetic batches, trained for --iterations steps
  --loop lightning: as a LightningModule under Trainer(strategy=PoseidonStrategy() or DDPStrategy),
  --loop plain:     in a plain loop with poseidon.DistributedModel or DistributedDataParallel,
SGD with momentum, batch 32 per rank, one thread. Launch under mpirun (in or out of `poseidon
lab`); rank 0 prints one JSON line: s_per_iter_median (past the first two steps) and images_per_s.
  mpirun -np 4 python bench/jobs/lightning_train.py --strategy poseidon --loop lightning --model fcnet
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import poseidon

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.torch_loop import timed_steps, warm_median  # noqa: E402
from jobs.fcnet_python import convnet, fcnet  # noqa: E402


def synthetic(a, rank):
    g = torch.Generator().manual_seed(rank)
    return torch.randn(a.batch, 1, 28, 28, generator=g), torch.randint(0, 10, (a.batch,), generator=g)


def lightning_times(a, net, lr, rank, world):
    import lightning.pytorch as pl
    from lightning.pytorch.strategies import DDPStrategy
    from poseidon.lightning import PoseidonStrategy

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = net

        def training_step(self, batch, batch_idx):
            return F.cross_entropy(self.net(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=lr, momentum=0.9)

    class Clock(pl.Callback):  # each step from batch start to batch end (forward, backward, step)
        def __init__(self):
            self.times = []

        def on_train_batch_start(self, *args):
            self.start = time.perf_counter()

        def on_train_batch_end(self, *args):
            self.times.append(time.perf_counter() - self.start)

    x, y = synthetic(a, rank)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x.repeat(a.iterations, 1, 1, 1),
                                                                      y.repeat(a.iterations)),
                                       batch_size=a.batch, shuffle=False)
    clock = Clock()
    ddp = a.strategy == "ddp"
    strategy = DDPStrategy(process_group_backend="gloo") if ddp else PoseidonStrategy()
    trainer = pl.Trainer(strategy=strategy, accelerator="cpu", devices=world if ddp else "auto", max_epochs=1,
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, callbacks=[clock], use_distributed_sampler=False)
    trainer.fit(Module(), data)
    return clock.times


def plain_times(a, net, lr, rank):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    model = torch.nn.parallel.DistributedDataParallel(net) if a.strategy == "ddp" else \
        poseidon.DistributedModel(net, optimizer)
    x, y = synthetic(a, rank)
    times = timed_steps(model, optimizer, x, y, a.iterations)
    if a.strategy != "ddp":
        model.close()
    return times


def main():
    ap = arguments(__doc__, poseidon=False)
    ap.add_argument("--strategy", choices=("poseidon", "ddp"), required=True)
    ap.add_argument("--loop", choices=("lightning", "plain"), required=True)
    ap.add_argument("--model", choices=("fcnet", "convnet"), default="fcnet")
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    torch.set_num_threads(1)
    poseidon.init()
    rank, world = poseidon.rank(), poseidon.size()
    if a.strategy == "ddp":  # the gloo group here; Lightning's DDPStrategy finds it made
        os.environ.update(LOCAL_RANK=str(rank), NODE_RANK="0", WORLD_SIZE=str(world))
        master = os.environ.get("LAB_MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", init_method=f"tcp://{master}:{a.port}", rank=rank, world_size=world)
    torch.manual_seed(0)
    net = fcnet() if a.model == "fcnet" else convnet()
    lr = 0.05 if a.model == "fcnet" else 0.01
    times = lightning_times(a, net, lr, rank, world) if a.loop == "lightning" else plain_times(a, net, lr, rank)
    s = warm_median(times)
    if rank == 0:
        print(json.dumps({"system": f"{a.loop}-{a.strategy}", "model": a.model, "ranks": world,
                          "s_per_iter_median": s, "images_per_s": world * a.batch / s}))


if __name__ == "__main__":
    main()
