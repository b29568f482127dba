"""Gradient mode on a 16-bit wire across real ranks (mpirun -np 3, issue 38): the shards
push and send back the mean gradient in bf16 (kMeanGrad16), so after backward() every
rank's .grad is one bf16 number per value, the same bits on every rank, near the exact
mean (the same steps under wire="fp32"); each rank's own optimizer (Adam) then keeps the
replicas equal. Exits non-zero on any mismatch."""
import sys

import torch
import torch.nn.functional as F

import poseidon

ITERATIONS = 4


def check(ok, what):
    if not ok:
        print(f"rank {poseidon.rank()}: FAIL {what}", flush=True)
        sys.exit(1)


def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(40, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def train(wire, data):
    """Each iteration's .grad after backward(), and the parameters at the end."""
    m = net()
    optimizer = torch.optim.Adam(m.parameters(), lr=1e-3)
    model = poseidon.DistributedModel(m, optimizer, scheme="ps", mode="gradient", wire=wire)
    grads = []
    for x, y in data:
        F.cross_entropy(model(x), y).backward()
        grads.append([p.grad.clone() for p in m.parameters()])
        optimizer.step()
        optimizer.zero_grad()
    model.synchronize()
    model.close()
    return grads, [p.detach().clone() for p in m.parameters()]


def main():
    poseidon.init()
    rank = poseidon.rank()
    g = torch.Generator().manual_seed(10 + rank)
    data = [(torch.randn(16, 40, generator=g), torch.randint(0, 10, (16,), generator=g)) for _ in range(ITERATIONS)]
    exact, _ = train("fp32", data)
    halved, params = train("bf16", data)
    for it, (e, h) in enumerate(zip(exact, halved)):
        for i, (a, b) in enumerate(zip(e, h)):
            check(torch.equal(b, b.to(torch.bfloat16).float()), f"iteration {it} tensor {i}: .grad is not bf16 values")
            every = poseidon.allgather(b.unsqueeze(0))
            check(all(torch.equal(every[0], r) for r in every), f"iteration {it} tensor {i}: ranks read other means")
            if it == 0:  # same parameters: only the rounding of pushes and mean apart
                err = float((a - b).norm() / a.norm())
                check(err < 1e-2, f"tensor {i}: the bf16 mean is {err:.2e} from the exact one")
    for i, p in enumerate(params):
        every = poseidon.allgather(p.unsqueeze(0))
        check(all(torch.equal(every[0], r) for r in every), f"parameter {i}: replicas differ")
    if rank == 0:
        print(f"gradient mode, wire bf16, {poseidon.size()} ranks: every .grad bf16 and equal on every rank; "
              "replicas equal", flush=True)


if __name__ == "__main__":
    main()
