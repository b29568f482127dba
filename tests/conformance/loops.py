#!/usr/bin/env python3
"""The conformance suite: training loops written the way PyTorch's and Horovod's examples
write them, each run under DistributedDataParallel (gloo) and under Poseidon's default
options (only the scheme varies), on the same data; the parameters each loop reads right
after its last optimizer.step(), without model.synchronize(), must match DDP's.

    mpirun -np 2 .venv/bin/python tests/conformance/loops.py --loops all --schemes auto,ps,sfb,allreduce
    ... --device cuda     (each rank on its local rank's GPU, ranks may share one; DDP with gloo)

Loops (--loops):
  plain        loss.backward(); optimizer.step(); optimizer.zero_grad()
  ema          plus an exponential moving average of the weights after every step
  step_lr      torch.optim.lr_scheduler.StepLR stepped after every optimizer.step()
  one_cycle    OneCycleLR (it cycles SGD's momentum too)
  warmup       the lr set by hand before each batch (Horovod's ImageNet warm-up)
  accumulate   two micro-batches per step, each loss divided by 2: DDP with no_sync() on
               the first, Poseidon with backward_passes_per_step=2 and no_sync()
  accumulate_hvd  the same, Horovod's way: no no_sync() (DDP syncs each pass; Poseidon with
               backward_passes_per_step=2 sums the passes)
  eval_epochs  model.eval() and a test forward under no_grad between "epochs", train() again
  frozen       a frozen first layer (requires_grad_(False), left out of the optimizer)
  two_groups   two parameter groups with different lr (mode auto then steps on the workers)
  save_load    state_dict() saved after a step, loaded into a fresh module, compared
  checkpoint   fc1 under activation checkpointing, `checkpoint` imported by name, reentrant
  checkpoint_plain  the same, use_reentrant=False
  clip         SGD with nesterov momentum, torch.nn.utils.clip_grad_norm_ right after backward() (DDP's way;
               mode auto then steps on the workers, and backward() returns with the mean)
  amp          the same optimizer under torch.autocast (bfloat16 on the CPU, float16 on CUDA) with a
               GradScaler, DDP's way: scaler.scale(loss).backward(); scaler.step(opt)
  clip_sgd     plain SGD with momentum (one the servers could run) and clip_grad_norm_ after backward():
               mode auto sees the first iteration read .grad and stays on the workers
  clip_hvd     the same, Horovod's way: optimizer.synchronize() (model.synchronize_gradients()), clip,
               step (DDP: nothing to synchronize)
  amp_sgd      plain SGD with momentum under autocast and a GradScaler (whose unscale_ reads .grad)
  grad_log     plain SGD; rank 0 alone logs the gradients' norm after backward() (a Python loop over
               .grad): every rank stays on the workers, and the logged norms match DDP's
  metrics      each rank's test loss averaged over the ranks after every other step:
               poseidon.allreduce against torch.distributed.all_reduce

Each case is compared per module (relative 2-norm of the difference) after the last step
against max(--tolerance, 10 x how far DDP moves from itself when every weight changes by
1e-7 relative: the training's own rounding sensitivity). --repeats N runs each Poseidon case
N times: the digests must be equal. Exits 1 naming every case beyond its bound.
"""
import argparse
import contextlib
import copy
import gc
import io
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint  # by name, as most programs import it

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import poseidon  # noqa: E402
from ddp_parity import end_comparison, start_comparison, worst  # noqa: E402

LOOPS = ("plain", "ema", "step_lr", "one_cycle", "warmup", "accumulate", "accumulate_hvd", "eval_epochs", "frozen", "two_groups",
         "save_load", "metrics", "checkpoint", "checkpoint_plain", "clip", "amp", "clip_sgd", "clip_hvd", "amp_sgd",
         "grad_log")
# Where mode "auto" steps after the first iteration: on the workers where the loop reads .grad
# or the optimizer is not one the servers run, else on the servers.
GRADIENT_MODE = ("two_groups", "clip", "amp", "clip_sgd", "clip_hvd", "amp_sgd", "grad_log")
STEPS = 8
BATCH = 8
CLASSES = 5


class Net(torch.nn.Module):
    """A convolution with BatchNorm (buffers; PS or allreduce) and two Linear layers (SFB)."""

    def __init__(self):
        super().__init__()
        self.checkpointing = None  # None, "reentrant" or "plain": fc1 recomputed in backward
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc1 = torch.nn.Linear(8 * 4 * 4, 32)
        self.fc2 = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        x = F.avg_pool2d(F.relu(self.bn(self.conv(x))), 2).flatten(1)
        if self.checkpointing:
            h = checkpoint(lambda t: F.relu(self.fc1(t)), x, use_reentrant=self.checkpointing == "reentrant")
        else:
            h = F.relu(self.fc1(x))
        return self.fc2(h)


def data(rank):
    """Each class its own pattern plus noise (a learnable task: rounding is not amplified)."""
    patterns = torch.randn((CLASSES, 3, 8, 8), generator=torch.Generator().manual_seed(99))
    g = torch.Generator().manual_seed(1000 + rank)
    out = []
    for _ in range(STEPS * 2):  # two micro-batches per step for `accumulate`
        y = torch.randint(0, CLASSES, (BATCH,), generator=g)
        out.append((patterns[y] + 0.5 * torch.randn((BATCH, 3, 8, 8), generator=g), y))
    return out


def optimizer_for(loop, net):
    if loop == "two_groups":
        return torch.optim.SGD([{"params": [p for n, p in net.named_parameters() if n.startswith("fc2")], "lr": 0.02},
                                {"params": [p for n, p in net.named_parameters() if not n.startswith("fc2")]}],
                               lr=0.05, momentum=0.9, weight_decay=1e-4)
    params = [p for p in net.parameters() if p.requires_grad]
    if loop in ("clip", "amp"):
        # Not one the servers run (nesterov): mode auto steps it on the workers. Not Adam,
        # whose first steps are nearly sign(g): rounding alone would move it beyond any bound.
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)


def scheduler_for(loop, optimizer):
    if loop == "step_lr":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    if loop == "one_cycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=STEPS)
    return None


def train(loop, model, module, optimizer, batches, accumulate_ctx, average, synchronize=lambda: None):
    """One loop as its users write it; returns what it read after the last step."""
    torch.manual_seed(7)
    scheduler = scheduler_for(loop, optimizer)
    ema = {n: p.detach().clone() for n, p in module.named_parameters()}
    test_x, test_y = batches[-1]
    metrics = []
    amp_type = torch.float16 if test_x.is_cuda else torch.bfloat16
    scaler = torch.amp.GradScaler(test_x.device.type, init_scale=2.0 ** 10) if loop.startswith("amp") else None
    logged = []
    for step in range(STEPS):
        if loop == "warmup":  # Horovod's examples set the lr before each batch
            for g in optimizer.param_groups:
                g["lr"] = 0.05 * min(1.0, (step + 1) / 4)
        if loop.startswith("accumulate"):
            for micro in range(2):
                x, y = batches[2 * step + micro]
                no_sync = loop == "accumulate" and micro == 0
                with accumulate_ctx() if no_sync else contextlib.nullcontext():
                    (F.cross_entropy(model(x), y) / 2).backward()
        elif loop.startswith("amp"):
            x, y = batches[step]
            with torch.autocast(x.device.type, dtype=amp_type):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
        else:
            x, y = batches[step]
            F.cross_entropy(model(x), y).backward()
        if loop == "clip_hvd":
            synchronize()  # Horovod's optimizer.synchronize()
        if loop.startswith("clip"):
            torch.nn.utils.clip_grad_norm_(module.parameters(), 0.5)
        if loop == "grad_log" and dist.get_rank() == 0:
            logged.append(torch.stack([p.grad.norm() for p in module.parameters()]).norm().reshape(1))
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad()
        if scheduler:
            scheduler.step()
        if loop == "ema":  # reads every parameter right after the step
            with torch.no_grad():
                for n, p in module.named_parameters():
                    ema[n].mul_(0.9).add_(p.detach(), alpha=0.1)
        if loop == "eval_epochs" and step % 3 == 2:
            model.eval()
            with torch.no_grad():
                model(test_x)
            model.train()
        if loop == "metrics" and step % 2 == 1:
            model.eval()
            with torch.no_grad():
                metrics.append(average(F.cross_entropy(model(test_x), test_y).reshape(1)))
            model.train()
    read = {"param " + n: p.detach().clone() for n, p in module.named_parameters()}
    read.update({"buffer " + n: b.detach().clone() for n, b in module.named_buffers() if b.is_floating_point()})
    if loop == "ema":
        read.update({"ema " + n: t.clone() for n, t in ema.items()})
    if metrics:
        read["metric test loss"] = torch.cat(metrics)
    if logged:
        read["logged gradient norm"] = torch.cat(logged)
    if loop == "save_load":  # what torch.save of state_dict() right after the step holds
        buf = io.BytesIO()
        torch.save(module.state_dict(), buf)
        buf.seek(0)
        fresh = Net().to(DEVICE)
        fresh.load_state_dict(torch.load(buf))
        read.update({"loaded " + n: p.detach().clone() for n, p in fresh.named_parameters()})
    return read


DEVICE = torch.device("cpu")


def make_net(loop, initial, scale=None):
    net = copy.deepcopy(initial).to(DEVICE)
    if scale is not None:
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(scale)
    if loop == "frozen":
        net.conv.requires_grad_(False)
    if loop.startswith("checkpoint"):
        net.checkpointing = "plain" if loop == "checkpoint_plain" else "reentrant"
    return net


def ddp_run(loop, initial, batches, scale=None):
    net = make_net(loop, initial, scale)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    def average(t):
        dist.all_reduce(t)
        return t / dist.get_world_size()
    return train(loop, ddp, net, optimizer_for(loop, net), batches, ddp.no_sync, average)


def poseidon_run(loop, scheme, initial, batches):
    net = make_net(loop, initial)
    optimizer = optimizer_for(loop, net)
    passes = 2 if loop.startswith("accumulate") else 1
    model = poseidon.DistributedModel(net, optimizer, scheme=scheme, backward_passes_per_step=passes)
    read = train(loop, model, net, optimizer, batches, model.no_sync, poseidon.allreduce, model.synchronize_gradients)
    model.synchronize()
    digest, mode = model.digest(), model.mode
    model.close()
    del model, optimizer
    gc.collect()
    return read, digest, mode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loops", default="all")
    a, loops, rank, size, device = start_comparison(ap, "loops", LOOPS)
    global DEVICE
    DEVICE = device
    torch.manual_seed(0)
    initial = Net()
    batches = [(x.to(DEVICE), y.to(DEVICE)) for x, y in data(rank)]
    failures = []
    for loop in loops:
        expected = ddp_run(loop, initial, batches)
        control = worst(expected, ddp_run(loop, initial, batches, scale=1 + 1e-7))[0]
        bound = max(a.tolerance, 10 * control)
        for scheme in a.schemes.split(","):
            digests = set()
            for _ in range(a.repeats):
                read, digest, mode = poseidon_run(loop, scheme, initial, batches)
                digests.add(digest)
                rel, name = worst(expected, read)
                mode_ok = mode == ("gradient" if loop in GRADIENT_MODE else "server")
                ok = rel <= bound and len(digests) == 1 and mode_ok
                if rank == 0:
                    print(f"np{size} {loop:11s} {scheme:9s} mode {mode:8s}: worst relative difference {rel:.2e} "
                          f"({name}), bound {bound:.0e}, digest {digest[:12]} {'ok' if ok else 'FAIL'}", flush=True)
                if not ok:
                    failures.append(f"{loop}/{scheme}")
    end_comparison(rank, failures)


if __name__ == "__main__":
    main()
