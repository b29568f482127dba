#!/usr/bin/env python3
"""The optimizer's state in server mode, where the servers step (mpirun -np 3):

  1. optimizer.state_dict() called on rank 0 alone after 4 steps holds every parameter's
     momentum as DDP's optimizer holds it (within 1e-5 relative), for each scheme (PS
     shards, SFB replicas, allreduce owners);
  2. Horovod's resume: rank 0 saves model and optimizer state, a new run (mode="server"
     from its first step) loads them on rank 0, broadcast_parameters and
     broadcast_optimizer_state, trains 4 more steps: as DDP's 8 uninterrupted steps;
  3. load_state_dict() mid-run on every rank (momentum set to zero after step 4) lands
     on the servers: as DDP with the same load;
  4. a state loaded on rank 0 only, not broadcast, stops every rank at start-up with an
     error that names broadcast_optimizer_state (replicas seeded differently would part).

Exits 1 naming each case beyond its bound.
"""
import copy
import io

import torch
import torch.nn.functional as F

import poseidon
from ddp_parity import end_comparison, gloo_group, horovod_reload, worst

STEPS = 8
TOLERANCE = 1e-5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.fc1 = torch.nn.Linear(4 * 6 * 6, 64)
        self.fc2 = torch.nn.Linear(64, 5)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(torch.relu(self.conv(x)).flatten(1))))


def batches(rank):
    g = torch.Generator().manual_seed(40 + rank)
    return [(torch.randn((6, 2, 6, 6), generator=g), torch.randint(0, 5, (6,), generator=g)) for _ in range(STEPS)]


def sgd(net):
    return torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)


def train(model, optimizer, data):
    for x, y in data:
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


def momentum_of(net, state):
    """name -> momentum buffer, from an SGD state_dict of net's parameters in order."""
    names = [n for n, _ in net.named_parameters()]
    return {"momentum " + names[i]: s["momentum_buffer"].detach().clone() for i, s in state["state"].items()}


def params(net):
    return {"param " + n: p.detach().clone() for n, p in net.named_parameters()}


def ddp(initial, data, zero_momentum_at=None):
    """(parameters after STEPS, momentum after 4 steps) of DDP."""
    net = copy.deepcopy(initial)
    optimizer = sgd(net)
    model = torch.nn.parallel.DistributedDataParallel(net)
    train(model, optimizer, data[:4])
    momentum = momentum_of(net, optimizer.state_dict())
    if zero_momentum_at == 4:
        state = optimizer.state_dict()
        for s in state["state"].values():
            s["momentum_buffer"].zero_()
        optimizer.load_state_dict(state)
    train(model, optimizer, data[4:])
    return params(net), momentum


def server_state(initial, data, scheme):
    """Momentum after 4 steps, from optimizer.state_dict() on rank 0 alone."""
    net = copy.deepcopy(initial)
    optimizer = sgd(net)
    model = poseidon.DistributedModel(net, optimizer, scheme=scheme, mode="server")
    train(model, optimizer, data[:4])
    momentum = momentum_of(net, optimizer.state_dict()) if poseidon.rank() == 0 else None
    train(model, optimizer, data[4:6])  # the others went on meanwhile: the job still trains
    model.close()
    return momentum


def resumed(initial, data, scheme):
    net = copy.deepcopy(initial)
    optimizer = sgd(net)
    model = poseidon.DistributedModel(net, optimizer, scheme=scheme, mode="server")
    train(model, optimizer, data[:4])
    saved = io.BytesIO()
    if poseidon.rank() == 0:
        torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict()}, saved)
    model.close()
    fresh = copy.deepcopy(initial)  # the initial weights: rank 0's load must replace them
    fresh_optimizer = sgd(fresh)
    horovod_reload(saved, fresh, fresh_optimizer)
    model = poseidon.DistributedModel(fresh, fresh_optimizer, scheme=scheme, mode="server")
    train(model, fresh_optimizer, data[4:])
    model.close()
    return params(fresh)


def loaded_mid_run(initial, data, scheme):
    net = copy.deepcopy(initial)
    optimizer = sgd(net)
    model = poseidon.DistributedModel(net, optimizer, scheme=scheme, mode="server")
    train(model, optimizer, data[:4])
    state = optimizer.state_dict()
    for s in state["state"].values():
        s["momentum_buffer"].zero_()
    optimizer.load_state_dict(state)
    train(model, optimizer, data[4:])
    model.close()
    return params(net)


def refused_on_some_ranks(initial, data, scheme):
    """The error every rank raises at the first forward, or None."""
    net = copy.deepcopy(initial)
    optimizer = sgd(net)
    if poseidon.rank() == 0:  # a momentum buffer on rank 0 alone, as a load there leaves it
        F.cross_entropy(net(data[0][0]), data[0][1]).backward()
        optimizer.step()
        optimizer.zero_grad()
    model = poseidon.DistributedModel(net, optimizer, scheme=scheme, mode="server")
    try:
        train(model, optimizer, data[:1])
        return None
    except ValueError as e:
        return str(e)
    finally:
        model.close()


def main():
    torch.set_num_threads(1)
    poseidon.init()
    rank = poseidon.rank()
    gloo_group(rank, poseidon.size())
    torch.manual_seed(0)
    initial = Net()
    data = batches(rank)
    expected, expected_momentum = ddp(initial, data)
    expected_zeroed, _ = ddp(initial, data, zero_momentum_at=4)
    failures = []
    for scheme in ("ps", "sfb", "allreduce"):
        checks = [("state_dict on rank 0", expected_momentum, server_state(initial, data, scheme)),
                  ("resume", expected, resumed(initial, data, scheme)),
                  ("load mid-run", expected_zeroed, loaded_mid_run(initial, data, scheme))]
        for what, want, got in checks:
            if got is None:  # rank 0 alone gathers
                continue
            rel, name = worst(want, got)
            ok = rel <= TOLERANCE and set(want) == set(got)
            print(f"rank {rank} {scheme:9s} {what:20s}: worst relative difference {rel:.2e} ({name}) "
                  f"{'ok' if ok else 'FAIL'}", flush=True)
            if not ok:
                failures.append(f"{scheme}/{what}")
        error = refused_on_some_ranks(initial, data, scheme)
        ok = error is not None and "broadcast_optimizer_state" in error
        print(f"rank {rank} {scheme:9s} state on rank 0 only: {error or 'no error'} {'ok' if ok else 'FAIL'}", flush=True)
        if not ok:
            failures.append(f"{scheme}/state on rank 0 only")
    end_comparison(rank, failures, f"beyond {TOLERANCE}")


if __name__ == "__main__":
    main()
