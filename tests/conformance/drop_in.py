#!/usr/bin/env python3
"""The conformance suite's second half: what people feed, build and save. Each case is a
short training script written the way ports of real code write it, run under
DistributedDataParallel (gloo) and under Poseidon's default options (only the scheme varies),
on the same data; the parameters read right after the last optimizer.step() must match DDP's.

    mpirun -np 2 .venv/bin/python tests/conformance/drop_in.py --cases all --schemes auto,ps,sfb,allreduce

Cases (--cases):
  pad_per_rank     token ids padded to each rank's own longest sequence (every NLP loader):
                   an Embedding, a Linear on [batch, tokens, features], masked mean pooling
  batch_per_rank   each rank its own batch size (rank r: 6 + 3r examples), the last batch smaller
  embedding_bag    nn.EmbeddingBag(text, offsets) with a different token count per rank
  tokens_sfb       a Linear on [batch, tokens_r, features] whose factor rows differ by rank and step
  branch_one_rank  a second head that one rank uses and the other not, by turns (DDP:
                   find_unused_parameters=True)
  branch_none      a head no rank uses on odd steps, SGD with momentum: DDP leaves its .grad None
                   and the optimizer skips it
  resume_state     Horovod's resume: rank 0 saves optimizer.state_dict() after 4 steps, a new run
                   loads it on rank 0, broadcasts parameters and optimizer state, trains 4 more
  resume_rows      the same with pad_per_rank's model, whose embedding goes by sparse rows
                   (its momentum replicated on every rank)
  compile_first    model = torch.compile(model), then wrapped (PyTorch's order for DDP)
  compile_after    wrapped, then torch.compile of the wrapper
  scheduler_first  the LR scheduler built before wrapping (Hugging Face's order): no warning DDP
                   would not print either

Each case is compared per module (relative 2-norm) against max(--tolerance, 10 x how far DDP moves
from itself when every weight changes by 1e-7 relative). --repeats N runs each Poseidon case N
times: the digests must be equal. --mode gradient or server: the same under that mode instead of
the default. --device cuda: models and batches on each rank's GPU (ranks may share one; DDP with
gloo). Exits 1 naming every case beyond its bound.
"""
import argparse
import copy
import gc
import io
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import poseidon  # noqa: E402
from ddp_parity import end_comparison, horovod_reload, start_comparison, worst  # noqa: E402

CASES = ("pad_per_rank", "batch_per_rank", "embedding_bag", "tokens_sfb", "branch_one_rank", "branch_none",
         "resume_state", "resume_rows", "compile_first", "compile_after", "scheduler_first")
STEPS = 8
DEVICE = torch.device("cpu")
VOCAB, WIDTH, CLASSES = 200, 16, 4  # a batch touches a few of the rows: sparse rows win


class Tokens(torch.nn.Module):
    """Embedding, a Linear over every token (its factor rows: batch x tokens), masked mean."""

    def __init__(self, width=WIDTH):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, width, padding_idx=0)
        self.mix = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, CLASSES)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).float()
        h = torch.tanh(self.mix(self.embed(ids))) * mask
        return self.head(h.sum(1) / mask.sum(1).clamp(min=1))


class Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(VOCAB, WIDTH, mode="mean")
        self.head = torch.nn.Linear(WIDTH, CLASSES)

    def forward(self, text, offsets):
        return self.head(self.bag(text, offsets))


class Heads(torch.nn.Module):
    """A trunk and two heads; `use_aux` says whether this step's loss takes the second."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Linear(12, 24)
        self.main = torch.nn.Linear(24, CLASSES)
        self.aux = torch.nn.Linear(24, CLASSES)

    def forward(self, x, use_aux):
        h = torch.relu(self.trunk(x))
        out = self.main(h)
        return out + 0.5 * self.aux(h) if use_aux else out


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 24)
        self.fc2 = torch.nn.Linear(24, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class WideTokens(Tokens):
    """A fine-tuning batch's few tokens through a wide Linear: factors are fewer bytes than
    its gradient, so scheme "auto" sends it by SFB, with factor rows that differ by rank."""

    def __init__(self):
        super().__init__(width=96)


def token_batches(rank, batch=6, longest=6):
    """Per step: ids [batch, longest of this rank's batch], 0-padded, and labels."""
    g = torch.Generator().manual_seed(500 + rank)
    out = []
    for _ in range(STEPS):
        lengths = torch.randint(2, longest + 4 * rank, (batch,), generator=g)
        ids = torch.zeros((batch, int(lengths.max())), dtype=torch.long)
        for i, n in enumerate(lengths.tolist()):
            ids[i, :n] = torch.randint(1, VOCAB, (n,), generator=g)
        out.append(((ids,), torch.randint(0, CLASSES, (batch,), generator=g)))
    return out


def bag_batches(rank):
    g = torch.Generator().manual_seed(600 + rank)
    out = []
    for _ in range(STEPS):
        lengths = torch.randint(1, 4 + 3 * rank, (5,), generator=g)
        text = torch.randint(0, VOCAB, (int(lengths.sum()),), generator=g)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        out.append(((text, offsets), torch.randint(0, CLASSES, (5,), generator=g)))
    return out


def dense_batches(rank, sizes):
    g = torch.Generator().manual_seed(700 + rank)
    return [((torch.randn((n, 12), generator=g),), torch.randint(0, CLASSES, (n,), generator=g)) for n in sizes]


def case_setup(case, rank):
    """(module class, this rank's batches, extra forward arguments per step, find_unused_parameters)."""
    if case in ("pad_per_rank", "resume_rows"):
        return Tokens, token_batches(rank), None, False
    if case == "tokens_sfb":
        return WideTokens, token_batches(rank, batch=2, longest=3), None, False
    if case == "embedding_bag":
        return Bag, bag_batches(rank), None, False
    if case == "batch_per_rank":
        return Plain, dense_batches(rank, [6 + 3 * rank] * (STEPS - 1) + [2 + rank]), None, False
    if case == "branch_one_rank":
        return Heads, dense_batches(rank, [8] * STEPS), lambda step: ((rank + step) % 2 == 0,), True
    if case == "branch_none":
        return Heads, dense_batches(rank, [8] * STEPS), lambda step: (step % 2 == 0,), True
    return Plain, dense_batches(rank, [8] * STEPS), None, False


def make_optimizer(net):
    return torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


def train(model, optimizer, batches, extra, first_step=0, scheduler=None):
    for step, (inputs, y) in enumerate(batches[first_step:], start=first_step):
        args = inputs + (extra(step) if extra else ())
        F.cross_entropy(model(*args), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        if scheduler:
            scheduler.step()


def read(module):
    return {"param " + n: p.detach().clone() for n, p in module.named_parameters()}


def on_device(batches):
    return [(tuple(t.to(DEVICE) for t in inputs), y.to(DEVICE)) for inputs, y in batches]


def ddp_run(case, initial, batches, extra, find_unused, scale=None):
    net = copy.deepcopy(initial).to(DEVICE)
    if scale is not None:
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(scale)
    optimizer = make_optimizer(net)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 3, 0.5) if case == "scheduler_first" else None
    inner = torch.compile(net) if case == "compile_first" else net
    model = torch.nn.parallel.DistributedDataParallel(inner, find_unused_parameters=find_unused)
    if case == "compile_after":
        model = torch.compile(model)
    train(model, optimizer, batches, extra, scheduler=scheduler)
    return read(net)


def poseidon_run(case, scheme, initial, batches, extra, mode="auto"):
    """(what the loop read, the digest, the schemes in use, the warnings the run printed)."""
    net = copy.deepcopy(initial).to(DEVICE)
    optimizer = make_optimizer(net)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if case in ("resume_state", "resume_rows"):
            digest, schemes = resumed_run(scheme, net, optimizer, batches, extra, mode)
        else:
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 3, 0.5) if case == "scheduler_first" else None
            wrapped = torch.compile(net) if case == "compile_first" else net
            model = poseidon.DistributedModel(wrapped, optimizer, scheme=scheme, mode=mode)
            runner = torch.compile(model) if case == "compile_after" else model
            train(runner, optimizer, batches, extra, scheduler=scheduler)
            model.synchronize()
            digest, schemes = model.digest(), schemes_of(model)
            model.close()
    gc.collect()
    # CUDA's notes on kernels without a deterministic variant are DDP's too (local_gpu asks for them).
    return read(net), digest, schemes, [str(w.message).splitlines()[0] for w in caught if w.category is not DeprecationWarning
                               and "deterministic" not in str(w.message)]


def resumed_run(scheme, net, optimizer, batches, extra, mode):
    """Horovod's pytorch_imagenet_resnet50.py: rank 0 saves model and optimizer state after a
    step; a new run loads them on rank 0 before wrapping, broadcasts both, trains on."""
    model = poseidon.DistributedModel(net, optimizer, scheme=scheme, mode=mode)
    train(model, optimizer, batches[:STEPS // 2], extra)
    saved = io.BytesIO()
    if poseidon.rank() == 0:
        torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict()}, saved)
    model.close()
    fresh = copy.deepcopy(net)
    with torch.no_grad():
        for p in fresh.parameters():
            p.zero_()  # what rank 0 loads must replace it
    fresh_optimizer = make_optimizer(fresh)
    horovod_reload(saved, fresh, fresh_optimizer)
    model = poseidon.DistributedModel(fresh, fresh_optimizer, scheme=scheme, mode=mode)
    train(model, fresh_optimizer, batches, extra, first_step=STEPS // 2)
    model.synchronize()
    digest, schemes = model.digest(), schemes_of(model)
    with torch.no_grad():
        for a, b in zip(net.parameters(), fresh.parameters()):
            a.copy_(b)  # what the caller reads
    model.close()
    return digest, schemes


def schemes_of(model):
    """The schemes the run's layers went by, each with its count (sfb 1, rows 1: what was exercised)."""
    plan = [p["scheme"] for p in model.plan()]
    return ", ".join(f"{s} {plan.count(s)}" for s in sorted(set(plan)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="all")
    ap.add_argument("--mode", default="auto", help="DistributedModel's mode (the default: auto)")
    a, cases, rank, size, device = start_comparison(ap, "cases", CASES)
    global DEVICE
    DEVICE = device
    failures = []
    for case in cases:
        module, batches, extra, find_unused = case_setup(case, rank)
        batches = on_device(batches)
        torch.manual_seed(0)
        initial = module()
        expected = ddp_run(case, initial, batches, extra, find_unused)
        control = worst(expected, ddp_run(case, initial, batches, extra, find_unused, scale=1 + 1e-7))[0]
        bound = max(a.tolerance, 10 * control)
        for scheme in a.schemes.split(","):
            digests = set()
            for _ in range(a.repeats):
                got, digest, schemes, warned = poseidon_run(case, scheme, initial, batches, extra, a.mode)
                digests.add(digest)
                rel, name = worst(expected, got)
                ok = rel <= bound and len(digests) == 1 and not warned
                if rank == 0:
                    print(f"np{size} {case:15s} {scheme:9s}: worst relative difference {rel:.2e} ({name}), bound "
                          f"{bound:.0e}, digest {digest[:12]} ({schemes}){' warned: ' + '; '.join(warned) if warned else ''} "
                          f"{'ok' if ok else 'FAIL'}", flush=True)
                if not ok:
                    failures.append(f"{case}/{scheme}")
    end_comparison(rank, failures)


if __name__ == "__main__":
    main()
