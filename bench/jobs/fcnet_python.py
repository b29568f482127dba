#!/usr/bin/env python3
"""fcnet (src/models/model_spec.cc) written in PyTorch and trained with the Python package:
the Python side of bench/system/python_vs_cli.py. Synthetic data, batch 32 per rank, SGD with
momentum on the servers (as `poseidon train`); prints a JSON summary as the last line.
--model convnet: the CLI's convnet instead; --overlap-step: DistributedModel(overlap_step=True);
--mode: DistributedModel's mode (auto, its default, decides after the first iteration)."""
import json
import os
import statistics
import sys

import torch
import torch.nn as nn

import poseidon

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.torch_loop import timed_steps  # noqa: E402


def fcnet():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(128 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10))


def convnet():
    return nn.Sequential(nn.Conv2d(1, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(128 * 7 * 7, 10))


def main():
    ap = arguments(__doc__, poseidon=False)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--scheme", default="auto")
    ap.add_argument("--model", default="fcnet", choices=("fcnet", "convnet"))
    ap.add_argument("--overlap-step", action="store_true",
                    help="step() returns before the new parameters are in (the paper's overlap)")
    ap.add_argument("--mode", default="auto", choices=("auto", "server", "gradient"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    poseidon.init()
    torch.manual_seed(0)
    net = fcnet() if a.model == "fcnet" else convnet()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05 if a.model == "fcnet" else 0.01, momentum=0.9)
    # Only what is asked for: the script also runs an older build's package (build_vs_build --python).
    extra = dict(mode=a.mode) if a.mode != "auto" else {}
    if a.overlap_step:
        extra["overlap_step"] = True
    model = poseidon.DistributedModel(net, optimizer, scheme=a.scheme, **extra)
    g = torch.Generator().manual_seed(poseidon.rank())
    x = torch.randn(a.batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    times = timed_steps(model, optimizer, x, y, a.iterations)
    model.synchronize()
    plan = [p["scheme"] for p in model.plan()]
    model.close()
    s = statistics.median(times[3:])
    if poseidon.rank() == 0:
        print(json.dumps({"s_per_iter_median": s, "images_per_s": a.batch * poseidon.size() / s, "plan": plan,
                          "mode": getattr(model, "mode", "?"), "first_3_steps_s": sum(times[:3])}))


if __name__ == "__main__":
    main()
