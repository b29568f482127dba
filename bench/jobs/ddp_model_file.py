#!/usr/bin/env python3
"""The peer: PyTorch DistributedDataParallel with the gloo backend (Debian's python3-torch),
training a model described in Poseidon's model-file format, so both run the same net with
the same ATen kernels, batch and thread settings. Launch one process per rank with mpirun
(rank and size from OMPI_COMM_WORLD_*), in or out of `poseidon lab`. Rank 0 prints one JSON
line: s_per_iter_median and images_per_s over all ranks. Usage:
  mpirun -np 4 python3 bench/jobs/ddp_model_file.py --model-file bench/models/fcnet.model --iterations 20 --port 29511
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, process_setup  # noqa: E402
from benchlib.torch_loop import rank_and_size, warm_median  # noqa: E402


def build(spec_text):
    """The same layers `poseidon train --model-file` builds (src/models/model_spec.cc)."""
    layers, channels, size, flat = [], 1, 28, None
    for line in spec_text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        op, args = words[0], words[1:]
        kv = dict(a.split("=") for a in args if "=" in a)
        pos = [a for a in args if "=" not in a]
        if op == "input":
            channels, size = int(pos[0]), int(pos[1])
        elif op == "conv":
            out, k = int(pos[0]), int(pos[1])
            stride, pad = int(kv.get("stride", 1)), int(kv.get("pad", 0))
            layers.append(nn.Conv2d(channels, out, k, stride=stride, padding=pad))
            channels, size = out, (size + 2 * pad - k) // stride + 1
        elif op == "relu":
            layers.append(nn.ReLU())
        elif op == "pool":
            layers.append(nn.MaxPool2d(int(pos[0])))
            size //= int(pos[0])
        elif op == "flatten":
            layers.append(nn.Flatten())
            flat = channels * size * size
        elif op == "dropout":
            layers.append(nn.Dropout(float(pos[0])))
        elif op == "fc":
            layers.append(nn.Linear(flat, int(pos[0])))
            flat = int(pos[0])
    return nn.Sequential(*layers)


def main():
    ap = arguments(__doc__, poseidon=False)
    ap.add_argument("--model-file", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--port", type=int, default=29511)
    ap.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()
    rank, world = rank_and_size()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", 1)))
    torch.manual_seed(42)
    with open(a.model_file) as f:
        model = build(f.read())
    if world > 1:
        master = os.environ.get("LAB_MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", init_method=f"tcp://{master}:{a.port}", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(a.batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    times = []
    for it in range(a.iterations):
        start = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    med = warm_median(times)
    if rank == 0:
        print(json.dumps({"system": "ddp-gloo", "ranks": world, "batch": a.batch, "iterations": a.iterations,
                          "s_per_iter_median": med, "images_per_s": world * a.batch / med,
                          "train_loss": float(loss), "blas": process_setup().blas_kernels(),
                          "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_")}))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
