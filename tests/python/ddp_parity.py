#!/usr/bin/env python3
"""Parity with PyTorch DDP: every rank trains two copies of one model on the same data,
one under torch.nn.parallel.DistributedDataParallel (gloo), one under
poseidon.DistributedModel, and compares parameters and buffers after --iterations.

    mpirun -np 4 .venv/bin/python tests/python/ddp_parity.py --model resnet18 \
        --schemes ps,sfb,allreduce,auto --setups sgd-server,sgd-gradient,adam

--device cuda trains both on this rank's GPU (poseidon.local_rank() of the visible ones;
ranks may share one), DDP with gloo on CUDA tensors, deterministic algorithms on.

Models: tests/python/models.py (torchvision's and small ones; transformer, tied_lm and lstm
take token ids). --repeats N trains each Poseidon case N times: every run must end with the
same digest.

States are compared after 3 steps and at the end, within --tolerance. Some trainings are
chaotic at the level of rounding (Adam's first steps are nearly sign(g), so a gradient
element that rounding moves across zero flips its update; BatchNorm on small batches
amplifies the last bits): --control measures how far DDP moves from itself when every
weight changes by 1e-7 relative, and the bound at each point is then ten times that
distance where it is larger than --tolerance.
Each (scheme, setup) is its own Poseidon session in the same processes (one after another);
DDP runs once per setup. Exits 1 naming every case whose worst tensor differs from DDP's by
more than --tolerance (relative: |a - b| / |a| per module's parameters or buffers, 2-norms); prints the figures.
A rank holds one training's memory at a time: DDP's reference states wait in a directory
under $TMPDIR (three states per rank: 1.5 GB for VGG-11) while Poseidon trains.
"""
import argparse
import copy
import datetime
import gc
import os
import shutil
import signal
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

import poseidon
from models import SEQUENCE_MODELS, build_model, build_sequence_model

# The benchmark's transformer decoders (Hugging Face configs, causal-LM loss on Zipf tokens).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
from benchlib.language_models import LANGUAGE_MODELS, build_language_model, zipf_batch  # noqa: E402

SETUPS = {
    "sgd-server": ("sgd", "server"),
    "sgd-gradient": ("sgd", "gradient"),
    "adam": ("adam", "gradient"),
    "adamw": ("adamw", "gradient"),
}


def optimizer_for(kind, params, lr):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr / 10, weight_decay=0.01)
    return torch.optim.Adam(params, lr=lr / 10)


def batches(args, classes, rank):
    """A learnable task (each class its own pattern plus noise): random labels would make
    training chaotic, where even DDP against itself with weights changed by 1e-7 ends O(1)
    apart after 20 iterations, and no comparison to rounding could be made. Sequence
    models get token ids: each class its own sequence, a quarter of its tokens replaced."""
    g = torch.Generator().manual_seed(1000 + rank)
    patterns_seed = torch.Generator().manual_seed(99)
    if args.model in SEQUENCE_MODELS:
        patterns = torch.randint(0, args.vocab, (classes, args.seq), generator=patterns_seed)
        noise = lambda y: torch.where(torch.rand(y.shape + (args.seq,), generator=g) < 0.25,
                                      torch.randint(0, args.vocab, y.shape + (args.seq,), generator=g), patterns[y])
    else:
        shape = (args.channels, args.image_size, args.image_size)
        patterns = torch.randn((classes,) + shape, generator=patterns_seed)
        noise = lambda y: patterns[y] + 0.5 * torch.randn(y.shape + shape, generator=g)
    if args.model in LANGUAGE_MODELS:  # next-token targets: ids [batch, seq], targets [batch * (seq - 1)]
        return [zipf_batch(args.batch, args.seq, args.vocab, g) for _ in range(args.iterations)]
    out = []
    for _ in range(args.iterations):
        y = torch.randint(0, classes, (args.batch,), generator=g)
        out.append((noise(y), y))
    return out


AMP_TYPES = {"cpu": torch.bfloat16, "cuda": torch.float16}
STRICT_STEPS = 3  # momentum, Adam's moments and gradient clearing all in play by then


def train(model, optimizer, data, seed, after_first, args, synchronize=None):
    """Trains; returns what after_first() returns after STRICT_STEPS steps (a state, or the
    path of one on disk). --amp: forward under torch.autocast, the loss through a GradScaler
    (Poseidon: synchronize() puts the mean gradients in .grad before the scaler reads them)."""
    torch.manual_seed(seed)  # the same dropout masks for DDP and Poseidon
    model.train()
    first = None
    device = torch.device(args.device)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 10) if args.amp else None
    for step, (x, y) in enumerate(data, 1):
        x, y = x.to(device), y.to(device)
        with torch.autocast(device.type, dtype=AMP_TYPES[device.type], enabled=args.amp):
            loss = F.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            if synchronize:
                synchronize()
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad()
        if step == STRICT_STEPS:
            first = after_first()
    return first


def ddp_run(initial, kind, args, data, rank, scale=None):
    """DDP's states after STRICT_STEPS steps and at the end, from a copy of initial (every
    weight times scale, if given); the copy, DDP's buckets and the optimizer are freed on
    return, so that only one training's memory is held at a time."""
    reference = copy.deepcopy(initial)
    if scale is not None:
        with torch.no_grad():
            for p in reference.parameters():
                p.mul_(scale)
    ddp = torch.nn.parallel.DistributedDataParallel(reference)
    first = train(ddp, optimizer_for(kind, reference.parameters(), args.lr), data, 7 + rank, ddp_snapshot(reference),
                  args)
    # As model.synchronize() does: every rank ends with rank 0's buffers (DDP's own broadcast
    # happens at the start of each forward, so the last forward's updates differ).
    for b in reference.buffers():
        dist.broadcast(b.data, 0)
    final = state(reference)
    del ddp, reference
    gc.collect()
    return first, final


def ddp_snapshot(module):
    """module's state with rank 0's buffers, as the next forward would start from."""
    def snap():
        for b in module.buffers():
            dist.broadcast(b.data, 0)
        return state(module)
    return snap


def poseidon_snapshot(model, module, store):
    """As ddp_snapshot, but the state goes to a file in store (its path is returned): the
    session's own buffers are still held when it is taken."""
    def snap():
        model.synchronize()
        return spill(state(module), store, "first")
    return snap


def spill(tensors, store, name):
    path = os.path.join(store, name + ".pt")
    torch.save(tensors, path)
    return path


def state(module, clone=True):
    """Parameters and floating-point buffers by name; copies unless clone=False (a view of
    the live tensors, for a comparison made at once)."""
    keep = (lambda t: t.detach().clone()) if clone else (lambda t: t.detach())
    return {**{"param " + n: keep(p) for n, p in module.named_parameters()},
            **{"buffer " + n: keep(b) for n, b in module.named_buffers() if b.is_floating_point()}}


def worst(a, b):
    """The largest relative difference |a - b| / |a| (2-norms) of a module's parameters (or
    of its buffers), and that module. Per module, not per tensor: a BatchNorm bias starts at
    zero and stays near it, so alone its relative difference says nothing."""
    groups = {}
    for name in a:
        groups.setdefault(name.rsplit(".", 1)[0], []).append(name)
    out = (0.0, "")
    for group, names in groups.items():
        diff = sum((a[n].double() - b[n].double()).pow(2).sum().item() for n in names) ** 0.5
        scale = sum(a[n].double().pow(2).sum().item() for n in names) ** 0.5 or 1.0
        out = max(out, (diff / scale, group))
    return out


def local_gpu():
    """This rank's GPU, made current: its local rank's among the visible ones (ranks may share
    one), with deterministic kernels so that every run computes the same."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS: before CUDA starts
    torch.cuda.set_device(poseidon.local_rank() % torch.cuda.device_count())
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    return torch.device("cuda", torch.cuda.current_device())


def gloo_group(rank, size):
    """DDP's process group (gloo) beside Poseidon, on a port rank 0 picks."""
    port = poseidon.broadcast_object(free_port() if rank == 0 else None)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="small_resnet")
    ap.add_argument("--schemes", default="ps,sfb,allreduce,auto")
    ap.add_argument("--setups", default="sgd-server,sgd-gradient,adam")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--classes", type=int, default=10, help="tied_lm: the vocabulary's size")
    ap.add_argument("--vocab", type=int, default=16, help="sequence models' vocabulary")
    ap.add_argument("--seq", type=int, default=8, help="sequence models' length")
    ap.add_argument("--repeats", type=int, default=1,
                    help="train each Poseidon case this many times; every run must end with the same digest")
    ap.add_argument("--lr", type=float, default=0.001, help="SGD's; Adam's is a tenth of it")
    ap.add_argument("--control", action="store_true",
                    help="also run DDP with weights changed by 1e-7 relative; bound: max(tolerance, 10 x its difference)")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--devices-per-node", default="1",
                    help="Poseidon's devices level: ranks per node (1: flat) or host; DDP stays flat")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--amp", action="store_true",
                    help="mixed precision: autocast (bfloat16 on the CPU, float16 on CUDA) and a GradScaler; "
                         "gradient-mode setups only")
    args = ap.parse_args()
    if args.amp and "sgd-server" in args.setups.split(","):
        ap.error("--amp: a GradScaler steps the optimizer on the workers; drop sgd-server from --setups")
    if args.iterations < STRICT_STEPS:
        ap.error(f"--iterations must be at least {STRICT_STEPS}")
    torch.set_num_threads(1)
    poseidon.init()
    rank, size = poseidon.rank(), poseidon.size()
    if args.device == "cuda":
        args.device = local_gpu()
    gloo_group(rank, size)
    torch.manual_seed(0)
    if args.model == "tied_lm":
        args.vocab = args.classes
    if args.model in LANGUAGE_MODELS:
        initial = build_language_model(args.model)
        args.vocab = initial.vocab
    elif args.model in SEQUENCE_MODELS:
        initial = build_sequence_model(args.model, args.vocab, args.classes, args.seq)
    else:
        initial = build_model(args.model, args.classes, args.channels)
    initial = initial.to(args.device)
    data = batches(args, args.classes, rank)
    store = tempfile.mkdtemp(prefix=f"ddp-parity-{rank}-")
    # mpirun stops the other ranks with SIGTERM when one fails: exit through the cleanup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    failures = []
    try:
        for setup in args.setups.split(","):
            failures += check_setup(args, setup, initial, data, store)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    end_comparison(rank, failures)


def start_comparison(ap, what, known):
    """The start of a conformance job compared against DDP: the common flags (--schemes,
    --tolerance, --repeats, --device) added to `ap` and parsed, `what`'s comma list checked
    against `known`, one thread, poseidon and the gloo group started, the device chosen.
    Returns (args, the chosen names, rank, size, device)."""
    ap.add_argument("--schemes", default="auto,ps,sfb,allreduce")
    ap.add_argument("--tolerance", type=float, default=1e-6)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = ap.parse_args()
    chosen = known if getattr(a, what) == "all" else getattr(a, what).split(",")
    for name in chosen:
        if name not in known:
            ap.error(f"--{what}: no {what[:-1]} {name!r} (have: {', '.join(known)})")
    torch.set_num_threads(1)
    poseidon.init()
    rank, size = poseidon.rank(), poseidon.size()
    device = local_gpu() if a.device == "cuda" else torch.device("cpu")
    gloo_group(rank, size)
    return a, chosen, rank, size, device


def horovod_reload(saved, fresh, fresh_optimizer):
    """Horovod's resume: rank 0 loads the model's and the optimizer's state that rank 0 saved
    in `saved` (torch.save of {"model", "optimizer"}), then both go to every rank."""
    if poseidon.rank() == 0:
        saved.seek(0)
        state = torch.load(saved)
        fresh.load_state_dict(state["model"])
        fresh_optimizer.load_state_dict(state["optimizer"])
    poseidon.broadcast_parameters(fresh.state_dict(), root_rank=0)
    poseidon.broadcast_optimizer_state(fresh_optimizer, root_rank=0)


def end_comparison(rank, failures, what="differs from DDP beyond the bound"):
    """The end of a job compared against DDP: the gloo group goes, and exit 1 naming each
    case that failed."""
    dist.destroy_process_group()
    if failures:
        print(f"rank {rank}: {what}: {', '.join(sorted(set(failures)))}", file=sys.stderr)
        sys.exit(1)


def check_setup(args, setup, initial, data, store):
    """DDP once (and once more with perturbed weights for --control), then every scheme;
    returns the cases that differ beyond the bound."""
    kind, _ = SETUPS[setup]
    rank, size = poseidon.rank(), poseidon.size()
    first_expected, expected = ddp_run(initial, kind, args, data, rank)
    moved = worst(state(initial, clone=False), expected)[0]
    # To disk before anything else trains: VGG-11 holds 0.5 GB per state.
    reference = {"first": spill(first_expected, store, "first_expected"), "end": spill(expected, store, "expected")}
    del first_expected, expected
    control = first_control = 0.0
    if args.control:
        # DDP against itself with every weight changed in its last bits: how far rounding
        # alone can move this training (a scale for the differences below).
        first_noisy, noisy = ddp_run(initial, kind, args, data, rank, scale=1 + 1e-7)
        first_control = worst(torch.load(reference["first"]), first_noisy)[0]
        control = worst(torch.load(reference["end"]), noisy)[0]
        del first_noisy, noisy
        if rank == 0:
            print(f"{args.model} np{size} {setup:12s} control: DDP vs DDP with weights x (1 + 1e-7): "
                  f"after {STRICT_STEPS} steps {first_control:.2e}, after {args.iterations} {control:.2e}",
                  flush=True)
    # Rounding alone moves a chaotic training (Adam's first steps are nearly sign(g)):
    # then the bound is ten times what it moved DDP itself.
    bounds = (max(args.tolerance, 10 * first_control), max(args.tolerance, 10 * control))
    return [f"{setup}/{scheme}" for scheme in args.schemes.split(",")
            if not check_scheme(args, setup, scheme, initial, data, store, reference, bounds, moved)]


def check_scheme(args, setup, scheme, initial, data, store, reference, bounds, moved):
    """`scheme` against DDP's states, args.repeats sessions one after another, each of which
    must end with the same digest; prints the figures (rank 0)."""
    digests = []
    ok = True
    for _ in range(args.repeats):
        case_ok, digest = run_scheme(args, setup, scheme, initial, data, store, reference, bounds, moved)
        ok, digests = ok and case_ok, digests + [digest]
    if len(set(digests)) > 1:
        ok = False
        if poseidon.rank() == 0:
            print(f"{args.model} {setup} {scheme}: {len(set(digests))} different digests in {len(digests)} runs "
                  f"(a run that is not reproducible) FAIL", flush=True)
    return ok


def run_scheme(args, setup, scheme, initial, data, store, reference, bounds, moved):
    """One Poseidon session of `scheme` against DDP's states: (within the bounds, digest)."""
    kind, mode = SETUPS[setup]
    rank, size = poseidon.rank(), poseidon.size()
    net = copy.deepcopy(initial)
    optimizer = optimizer_for(kind, net.parameters(), args.lr)
    nodes = args.devices_per_node if args.devices_per_node == "host" else int(args.devices_per_node)
    model = poseidon.DistributedModel(net, optimizer, scheme=scheme, mode=mode, devices_per_node=nodes)
    first_path = train(model, optimizer, data, 7 + rank, poseidon_snapshot(model, net, store), args,
                       model.synchronize_gradients if args.amp else None)
    model.synchronize()
    sfb = sum(1 for p in model.plan() if p["scheme"] == "sfb")
    rows = sum(1 for p in model.plan() if p["scheme"] == "rows")
    digest = model.digest()
    model.close()
    del model, optimizer  # the session's and the optimizer's memory, before the states are loaded
    gc.collect()
    first_rel = worst(torch.load(reference["first"]), torch.load(first_path))[0]
    rel, name = worst(torch.load(reference["end"]), state(net, clone=False))
    # SFB asked for and possible (a model that ends in a Linear whose forward runs): it must be in use.
    # After a few steps rounding has not been amplified yet: the strict tolerance.
    # Not under autocast: a half-precision Linear goes by PS (its factors would round otherwise).
    sfb_expected = scheme == "sfb" and size > 1 and args.model not in ("tied_lm", "gpt2-tiny", "gpt2-mini") and not args.amp
    # An untied embedding (LLaMA's) under auto, with more than one rank: its batch's rows go sparse.
    rows_expected = scheme == "auto" and size > 1 and args.model.startswith("llama")
    ok = (first_rel <= bounds[0] and rel <= bounds[1] and moved > 0 and (not sfb_expected or sfb > 0)
          and (not rows_expected or rows > 0))
    if rank == 0:
        print(f"{args.model} np{size} {setup:12s} {scheme:9s} sfb layers {sfb:2d}, rows {rows}: worst relative "
              f"difference after {STRICT_STEPS} steps {first_rel:.2e}, after {args.iterations} {rel:.2e} ({name}); "
              f"moved from initial {moved:.2e} (bounds {bounds[0]:.0e}, {bounds[1]:.0e}) digest {digest[:12]} "
              f"{'ok' if ok else 'FAIL'}", flush=True)
    return ok, digest


if __name__ == "__main__":
    main()
