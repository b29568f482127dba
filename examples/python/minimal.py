#!/usr/bin/env python3
"""A plain PyTorch training loop made data-parallel with Poseidon. The lines marked
`# poseidon` are all a user adds; everything else is the loop they already have.

    mpirun -np 4 --oversubscribe .venv/bin/python examples/python/minimal.py

(from the build tree: PYTHONPATH=build/python; after `cmake --install build`, as it is.)
"""
import torch
import torch.nn.functional as F

import poseidon  # poseidon

poseidon.init()  # poseidon
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
model = poseidon.DistributedModel(model, optimizer)  # poseidon

g = torch.Generator().manual_seed(poseidon.rank())  # poseidon: each rank its own data
for step in range(50):
    x = torch.randn(32, 1, 28, 28, generator=g)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()  # a task the model can learn
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % 10 == 0 and poseidon.rank() == 0:  # poseidon: print once
        print(f"step {step} loss {loss.item():.4f}", flush=True)
model.synchronize()  # poseidon: every rank holds the same parameters
if poseidon.rank() == 0:
    print(f"done: loss {loss.item():.4f}, digest {model.digest()[:16]}")
