#!/usr/bin/env python3
"""Checkpoint and resume from Python: a job of --iterations steps run straight through must
end with the same parameters, buffers and optimizer state as one saved halfway, closed, and
resumed into a freshly initialised model (other weights, other random state).

    mpirun -np 2 .venv/bin/python tests/python/checkpoint_resume.py

Setups: SGD on the servers with scheme sfb, ps and auto (server values, momentum and the SFB
replicas in the checkpoint), Adam in gradient mode with an LR scheduler passed as a
checkpoint object. The model has BatchNorm (buffers) and Dropout (random state). Then bad
resumes: another optimizer, no checkpoint in the folder; each must fail with its message and
leave the folder as it was. Exits 1 naming what failed. --device cuda: on this rank's GPU.
--model tokens: an Embedding of 200 rows (sparse rows under auto) on token batches whose
length changes each step, so the resumed run's first batch touches other rows than the
saving run's: its plan must still be the saved one.
"""
import argparse
import hashlib
import os
import shutil
import sys
import tempfile

import torch

import poseidon

SETUPS = [("sgd", "sfb"), ("sgd", "ps"), ("sgd", "auto"), ("adam", "auto")]
DEVICE = torch.device("cpu")  # main() sets it from --device
MODEL = "convnet"  # main() sets it from --model


class Tokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(200, 16)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, ids):
        return self.head(torch.tanh(self.embed(ids)).mean(dim=1))


def build(seed):
    torch.manual_seed(seed)
    if MODEL == "tokens":
        return Tokens().to(DEVICE)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 96), torch.nn.ReLU(), torch.nn.Dropout(0.3),
        torch.nn.Linear(96, 10)).to(DEVICE)


def batch(iteration, rank):
    g = torch.Generator().manual_seed(1000 * iteration + rank)
    if MODEL == "tokens":
        ids = torch.randint(0, 200, (16, 2 + 3 * (iteration % 4)), generator=g)
        return ids.to(DEVICE), torch.randint(0, 10, (16,), generator=g).to(DEVICE)
    return torch.randn(16, 1, 16, 16, generator=g).to(DEVICE), torch.randint(0, 10, (16,), generator=g).to(DEVICE)


def wrap(net, kind, scheme, **checkpointing):
    if kind == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        return poseidon.DistributedModel(net, opt, scheme=scheme, **checkpointing), opt, []
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return poseidon.DistributedModel(net, opt, scheme=scheme, checkpoint_objects=[sched], **checkpointing), opt, [sched]


def train(model, opt, scheds, first, last):
    for it in range(first, last):
        x, y = batch(it, poseidon.rank())
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        for s in scheds:
            s.step()
    model.synchronize()


def state_of(model, opt):
    """The model's digest and the optimizer's state (gradient mode: Adam's moments and lr)."""
    h = hashlib.sha256()
    for group in opt.state_dict()["param_groups"]:
        h.update(repr(group["lr"]).encode())
    for s in opt.state_dict()["state"].values():
        for v in s.values():
            h.update(repr(v.tolist() if torch.is_tensor(v) else v).encode())
    return model.digest(), h.hexdigest()


def tree_digest(folder):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                h.update(name.encode() + f.read())
    return h.hexdigest()


def one_setup(kind, scheme, total, folder, failures):
    half = total // 2
    model, opt, scheds = wrap(build(1), kind, scheme)
    train(model, opt, scheds, 0, total)
    straight = state_of(model, opt)
    schemes = sorted({p["scheme"] for p in model.plan()})
    model.close()

    model, opt, scheds = wrap(build(1), kind, scheme, checkpoint_dir=folder, checkpoint_every=half)
    train(model, opt, scheds, 0, half)
    model.close()

    torch.manual_seed(12345)  # another random state: the checkpoint must bring back the saved one
    model, opt, scheds = wrap(build(2), kind, scheme, checkpoint_dir=folder, resume=True)
    if model.start_iteration != half:
        failures.append(f"{kind}/{scheme}: start_iteration {model.start_iteration}, expected {half}")
    train(model, opt, scheds, model.start_iteration, total)
    resumed = state_of(model, opt)
    model.close()
    ok = resumed == straight
    if poseidon.rank() == 0:
        print(f"{kind}/{scheme} ({', '.join(schemes)}): straight {straight[0][:16]} resumed {resumed[0][:16]} "
              f"optimizer {'equal' if resumed[1] == straight[1] else 'DIFFERENT'}", flush=True)
    if not ok:
        failures.append(f"{kind}/{scheme}: the resumed job ends elsewhere than the straight one")


def expect_failure(what, phrase, make, failures):
    try:
        make()
    except (poseidon.Error, ValueError) as e:
        if phrase not in str(e):
            failures.append(f"{what}: the error '{e}' does not say '{phrase}'")
        return
    failures.append(f"{what}: no error")


def bad_resumes(folder, failures):
    before = tree_digest(folder)

    def other_optimizer():
        model, opt, scheds = wrap(build(1), "sgd", "auto", checkpoint_dir=folder, resume=True)
        try:
            train(model, opt, scheds, model.start_iteration, model.start_iteration + 1)
        finally:
            model.close()

    expect_failure("another optimizer", "other settings", other_optimizer, failures)
    expect_failure("an empty folder", "no complete checkpoint",
                   lambda: wrap(build(1), "sgd", "ps", checkpoint_dir=folder + "/empty", resume=True), failures)
    if tree_digest(folder) != before:
        failures.append("a failed resume changed the checkpoint folder")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--model", default="convnet", choices=("convnet", "tokens"))
    args = ap.parse_args()
    poseidon.init()
    global DEVICE, MODEL
    MODEL = args.model
    if args.device == "cuda":
        torch.cuda.set_device(poseidon.local_rank() % torch.cuda.device_count())
        DEVICE = torch.device("cuda", torch.cuda.current_device())
    root = poseidon.broadcast_object(tempfile.mkdtemp(prefix="poseidon-ckpt-") if poseidon.rank() == 0 else None)
    failures = []
    try:
        for kind, scheme in SETUPS:
            one_setup(kind, scheme, args.iterations, f"{root}/{kind}-{scheme}", failures)
        if poseidon.rank() == 0:
            os.makedirs(f"{root}/adam-auto/empty")
        poseidon.broadcast_object(None)  # the empty folder exists before anyone looks
        bad_resumes(f"{root}/adam-auto", failures)
    finally:
        poseidon.broadcast_object(None)
        if poseidon.rank() == 0:
            shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print(f"rank {poseidon.rank()}: FAILED {f}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
