#!/usr/bin/env python3
"""Opening and closing many DistributedModels in one process keeps its memory flat, also
when some of them end by a peer's failure: under mpirun, each rank opens --models models
one after the other (a 2M-parameter MLP, 8 MB), trains a few steps and closes it. Every
fifth model, rank 1 raises in its loop (the user's exception, caught outside the model's
close): rank 1 leaves the job, rank 0's sync fails at once with its reason, and both go
on to the next model (within 5 s, or the test fails: the timeout is 20 s, the
transport's stop deadline 10 s). Odd models run with staleness 1, whose shards keep values of their
own. Each rank's resident memory is read after every model from the tenth on; the lowest
reading over the last ten models must exceed the lowest over models 10-19 by less than
--slack MB: a leaked model is 8 MB of parameters plus its gradients (and the shard's
values), and sends a peer never took hold 2 MB pairs each, so a leak in every failed
model grows it by tens of MB. (Right after a model whose backward raised, rank 0 still
holds up to 16 MB of it: torch's autograd engine keeps the failed backward's pending work
on that thread until the next backward there, which frees it; checked by running a
one-element backward after such a model, which brings the reading back down. The lowest
reading of ten is what stays.)

    PYTHONPATH=build/python mpirun -np 2 .venv/bin/python tests/python/memory_flat.py
"""
import argparse
import gc
import sys
import time

import torch
import torch.nn.functional as F

import poseidon


def resident_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class UserBug(RuntimeError):
    pass


def one_model(index, a):
    torch.manual_seed(index)
    net = torch.nn.Sequential(torch.nn.Linear(256, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    model = poseidon.DistributedModel(net, opt, scheme=a.scheme, staleness=index % 2, timeout=a.timeout)
    fails = index % 5 == 4
    try:
        for step in range(4):
            if fails and step == 2 and poseidon.rank() == 1:
                raise UserBug(f"model {index}: the user's loop fails on rank 1")
            F.cross_entropy(model(torch.randn(16, 256)), torch.randint(0, 10, (16,))).backward()
            opt.step()
            opt.zero_grad()
    finally:
        model.close()
    return "trained"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=50, help="at least 30")
    ap.add_argument("--slack", type=float, default=12.0, help="MB of growth allowed from model 10 to the last")
    ap.add_argument("--scheme", default="ps")
    ap.add_argument("--timeout", type=float, default=20.0, help="each model's sync timeout, s; a failed model "
                    "must end within a quarter of it (at most 5 s)")
    a = ap.parse_args()
    if a.models < 30:
        ap.error("--models must be at least 30 (two windows of ten, from the tenth model)")
    torch.set_num_threads(1)
    poseidon.init()
    outcomes, marks, slow = {}, {}, []
    for i in range(a.models):
        start = time.monotonic()
        try:
            outcome = one_model(i, a)
        except UserBug:
            outcome = "the user's bug"
        except Exception as e:  # a sync that failed because the peer left
            outcome = "failed with its peer"
            if "rank 1 left the job: its training loop raised an exception" not in str(e):
                slow.append(f"model {i}: {type(e).__name__}: {str(e)[:300]}")
        took = time.monotonic() - start
        if took > min(5.0, a.timeout / 4):  # the peer's notice, not a timeout or the 10 s stop deadline
            slow.append(f"model {i} took {took:.1f} s")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        gc.collect()
        if i + 1 >= 10:
            marks[i + 1] = resident_mb()
    early = min(marks[n] for n in range(10, 20))
    late = min(marks[n] for n in range(a.models - 9, a.models + 1))
    grew = late - early
    failed = a.models - outcomes.get("trained", 0)
    print(f"rank {poseidon.rank()}: {a.models} models ({failed} ended by an error: {outcomes}); resident "
          f"lowest {early:.0f} MB over models 10-19, {late:.0f} MB over the last ten: {grew:+.1f} MB "
          f"(single readings {min(marks.values()):.0f}-{max(marks.values()):.0f} MB)", flush=True)
    if slow:
        # The peer's leaving notice ends the sync at once, with its reason.
        print(f"rank {poseidon.rank()}: not ended by the peer's notice: {slow}", file=sys.stderr)
        sys.exit(1)
    if failed < a.models // 5:
        print(f"rank {poseidon.rank()}: only {failed} models failed; the failure path was not exercised",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(0 if grew < a.slack else 1)


if __name__ == "__main__":
    main()
