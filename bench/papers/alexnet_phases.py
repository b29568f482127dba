#!/usr/bin/env python3
"""Where one plain PyTorch process spends an AlexNet iteration (torchvision, 63x63, batch 32,
one thread, SGD with momentum): forward, backward, optimizer step, zero_grad, medians of
iterations 3..--iterations. With --no-fc-weight-grad the classifier's Linear weights need no
gradient, as under SFB (Poseidon computes their update from the sufficient factors instead):
the difference is what autograd's dense FC weight gradients cost. Explains why the
"compute only" loop of bench/papers/papers_models_vs_ddp.py is no bound for Poseidon on FC-heavy models.
    OMP_NUM_THREADS=1 .venv/bin/python bench/papers/alexnet_phases.py [--no-fc-weight-grad]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-fc-weight-grad", action="store_true")
    ap.add_argument("--iterations", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torchvision.models.alexnet(num_classes=1000)
    if a.no_fc_weight_grad:
        for m in net.classifier:
            if isinstance(m, torch.nn.Linear):
                m.weight.requires_grad_(False)
    opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.01, momentum=0.9)
    x, y = torch.randn(32, 3, 63, 63), torch.randint(0, 1000, (32,))
    phases = {"forward": [], "backward": [], "step": [], "zero_grad": []}
    for i in range(a.iterations):
        t = [time.perf_counter()]
        loss = F.cross_entropy(net(x), y)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        opt.zero_grad()
        t.append(time.perf_counter())
        if i >= 2:
            for k, (start, end) in zip(phases, zip(t, t[1:])):
                phases[k].append(end - start)
    print(" ".join(f"{k} {statistics.median(v):.4f} s" for k, v in phases.items()))


if __name__ == "__main__":
    main()
