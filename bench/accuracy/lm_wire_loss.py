#!/usr/bin/env python3
"""The 16-bit wire on a transformer decoder (issue 64): one rank-side script, run under
mpirun, that trains the same model from the same weights on the same per-rank Zipf token
batches once per --wires entry (Poseidon's defaults otherwise: scheme auto, mode auto, SGD
with momentum, or AdamW with --optimizer adamw), then prints, on rank 0, each run's causal-LM
loss on held-out batches and its gap to fp32's (the acceptance: within 0.3). Usage:
  mpirun -np 4 --oversubscribe .venv/bin/python bench/accuracy/lm_wire_loss.py \\
      --model llama-mini --steps 40 [--wires fp32,bf16] [--optimizer sgd]
"""
import argparse
import copy
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.language_models import LANGUAGE_MODELS, batch_of, build_language_model, zipf_batch  # noqa: E402


def optimizer_for(kind, params):
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)


def eval_loss(net, batches):
    net.eval()
    with torch.no_grad():
        loss = sum(F.cross_entropy(net(x), y).item() for x, y in batches) / len(batches)
    net.train()
    return loss


def main():
    import poseidon
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama-mini", choices=LANGUAGE_MODELS)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--wires", default="fp32,bf16")
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adamw"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    poseidon.init()
    rank = poseidon.rank()
    torch.manual_seed(0)
    initial = build_language_model(a.model)
    g = torch.Generator().manual_seed(100 + rank)
    train = [zipf_batch(batch_of(a.model), a.seq, initial.vocab, g) for _ in range(a.steps)]
    held_out = [zipf_batch(batch_of(a.model), a.seq, initial.vocab, torch.Generator().manual_seed(7 + i))
                for i in range(4)]
    before = eval_loss(initial, held_out)
    losses = {}
    for wire in a.wires.split(","):
        net = copy.deepcopy(initial)
        optimizer = optimizer_for(a.optimizer, net.parameters())
        model = poseidon.DistributedModel(net, optimizer, wire=wire)
        for x, y in train:
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
        model.synchronize()
        model.close()
        losses[wire] = eval_loss(net, held_out)
        if rank == 0:
            gap = f", gap to fp32 {losses[wire] - losses['fp32']:+.4f}" if "fp32" in losses and wire != "fp32" else ""
            print(f"{a.model}, {poseidon.size()} ranks, {a.steps} steps of {batch_of(a.model)} x {a.seq} tokens per "
                  f"rank, {a.optimizer}: held-out loss {before:.4f} before, {losses[wire]:.4f} after with wire "
                  f"{wire}{gap}", flush=True)


if __name__ == "__main__":
    main()
