#!/usr/bin/env python3
"""Step time of a torch.compile'd model under Poseidon, beside DDP + compile: the same small
convnet and loop (forward, backward, optimizer.step(), zero_grad) on every rank, CPU, gloo for
DDP; systems alternate round by round, each round times --steps steps after --warmup steps
(compilation excluded). Prints each system's median ms per step and its ratio to DDP + compile.

    mpirun -np 2 --oversubscribe .venv/bin/python bench/system/compiled_step_time.py --rounds 5

Systems: ddp (eager), ddp+compile (DDP of torch.compile(model)), poseidon (eager, defaults),
poseidon:compile-then-wrap (DistributedModel(torch.compile(model), opt)),
poseidon:wrap-then-compile (torch.compile(DistributedModel(model, opt))).
"""
import argparse
import copy
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests",
                                "python"))
import poseidon  # noqa: E402
from ddp_parity import gloo_group  # noqa: E402

SYSTEMS = ("ddp", "ddp+compile", "poseidon", "poseidon:compile-then-wrap", "poseidon:wrap-then-compile")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = torch.nn.Linear(32 * 8 * 8, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def wrapped(system, net, optimizer):
    """(what the loop calls, what to close)."""
    if system == "ddp":
        return torch.nn.parallel.DistributedDataParallel(net), None
    if system == "ddp+compile":
        return torch.nn.parallel.DistributedDataParallel(torch.compile(net)), None
    if system == "poseidon:compile-then-wrap":
        model = poseidon.DistributedModel(torch.compile(net), optimizer)
        return model, model
    model = poseidon.DistributedModel(net, optimizer)
    return (torch.compile(model) if system == "poseidon:wrap-then-compile" else model), model


def one_round(system, initial, data, warmup, steps):
    net = copy.deepcopy(initial)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    model, closing = wrapped(system, net, optimizer)
    times = []
    for i in range(warmup + steps):
        x, y = data[i % len(data)]
        start = time.perf_counter()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    if closing is not None:
        closing.close()
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    a = ap.parse_args()
    systems = a.systems.split(",")
    torch.set_num_threads(1)
    poseidon.init()
    rank = poseidon.rank()
    gloo_group(rank, poseidon.size())
    torch.manual_seed(0)
    initial = Net()
    g = torch.Generator().manual_seed(rank)
    data = [(torch.randn((a.batch, 3, 32, 32), generator=g), torch.randint(0, 10, (a.batch,), generator=g))
            for _ in range(8)]
    per = {s: [] for s in systems}
    for r in range(a.rounds):
        for s in (systems if r % 2 == 0 else systems[::-1]):
            per[s].append(one_round(s, initial, data, a.warmup, a.steps))
        if rank == 0:
            print(f"round {r + 1}: " + ", ".join(f"{s} {per[s][-1]:.2f} ms" for s in systems), flush=True)
    if rank == 0:
        ref = statistics.median(per["ddp+compile"]) if "ddp+compile" in per else None
        print(f"{poseidon.size()} ranks, batch {a.batch} per rank, {a.steps} steps per round, {a.rounds} rounds "
              f"(medians):")
        for s in systems:
            m = statistics.median(per[s])
            print(f"  {s:28s} {m:8.2f} ms/step" + (f"   {ref / m:.2f}x DDP+compile's speed" if ref else ""))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
