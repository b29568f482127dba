#!/usr/bin/env python3
"""Trains a torchvision classification model data-parallel with Poseidon, on Fashion-MNIST
(scaled to the model's input and made 3-channel) or on synthetic data.

    mpirun -np 4 --oversubscribe .venv/bin/python examples/python/train_torchvision.py \\
        --model resnet18 --epochs 1
    ... --model vgg19 --synthetic --image-size 64 --iterations 20 --json
    ... --checkpoint-dir ckpt --checkpoint-every 100     (then --resume to continue from ckpt)

Progress on rank 0 (iteration, loss, images/s); test accuracy after each epoch; with
--json a summary as the last stdout line (the fields of `poseidon train --json`).
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

import poseidon

MODELS = ("resnet18", "resnet50", "resnet152", "vgg11", "vgg19", "vgg19_bn", "alexnet", "googlenet",
          "inception_v3")
DATA = "/usr/share/datasets/fashion-mnist"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18", choices=MODELS)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=0, help="stop after this many iterations (0: whole epochs)")
    ap.add_argument("--batch", type=int, default=32, help="examples per rank per iteration")
    ap.add_argument("--image-size", type=int, default=0, help="input side (default: 48 for ResNets, 75 for inception_v3, "
                    "63 for alexnet, else 32)")
    ap.add_argument("--synthetic", action="store_true", help="random images instead of Fashion-MNIST")
    ap.add_argument("--data", default=DATA, help="Fashion-MNIST IDX files (.gz)")
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"))
    ap.add_argument("--lr", type=float, default=0.0, help="default: 0.05 for sgd, 1e-3 for adam/adamw")
    ap.add_argument("--lr-schedule", default="linear", choices=("linear", "constant"),
                    help="linear: decay to zero over the run (on the servers in server mode)")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--scheme", default="auto", choices=("auto", "ps", "sfb", "allreduce"))
    ap.add_argument("--mode", default="auto", choices=("auto", "server", "gradient"))
    ap.add_argument("--cost-model", default="bytes", choices=("bytes", "time"))
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="auto: this rank's GPU (local rank among the visible ones; ranks may share one) "
                    "where PyTorch sees one, else the CPU")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--checkpoint-dir", help="save the whole job in this folder (with --checkpoint-every)")
    ap.add_argument("--checkpoint-every", type=int, default=0, help="save a checkpoint every N iterations")
    ap.add_argument("--resume", action="store_true",
                    help="continue from the newest checkpoint in --checkpoint-dir (same flags and -np)")
    ap.add_argument("--json", action="store_true", help="a JSON summary as the last line")
    a = ap.parse_args()
    if a.epochs < 1 or a.batch < 1 or a.iterations < 0:
        ap.error("--epochs and --batch must be at least 1, --iterations at least 0")
    # ResNets downsample by 4 in their stem: 48 keeps 12x12 maps after it (32 keeps 8x8: -2%).
    a.image_size = a.image_size or {"inception_v3": 75, "alexnet": 63}.get(a.model, 48 if "resnet" in a.model else 32)
    a.lr = a.lr or (0.05 if a.optimizer == "sgd" else 1e-3)
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: PyTorch sees no CUDA GPU here (use --device cpu)")
    return a


def pick_device(choice):
    """This rank's device: its local rank's GPU among the visible ones, as DDP scripts do."""
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    device = torch.device("cuda", poseidon.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def build(name, classes):
    kwargs = {"num_classes": classes}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    return getattr(torchvision.models, name)(**kwargs)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape).copy())


def fashion_mnist(folder, split, size):
    images = read_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz")).float().div_(255).unsqueeze(1)
    labels = read_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz")).long()
    images = (images - 0.2860) / 0.3530
    if size != 28:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    return images.expand(-1, 3, -1, -1).contiguous(), labels


def make_optimizer(a, params):
    if a.optimizer == "sgd":
        return torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    cls = torch.optim.Adam if a.optimizer == "adam" else torch.optim.AdamW
    return cls(params, lr=a.lr, weight_decay=a.weight_decay)


def evaluate(model, images, labels, rank, size, device):
    """Accuracy over the whole test set: each rank a share, summed over ranks."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(rank * 256, len(images), 256 * size):
            out = model(images[i:i + 256].to(device))
            correct += (out.argmax(1).cpu() == labels[i:i + 256]).sum().item()
    model.train()
    counts = torch.tensor([float(correct)])
    total = 0.0
    for r in range(size):  # rank r's count, from rank r
        c = counts.clone()
        poseidon.broadcast_parameters([("correct", c)], root_rank=r)
        total += c.item()
    return total / len(images)


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    poseidon.init()
    rank, size = poseidon.rank(), poseidon.size()
    device = pick_device(a.device)
    torch.manual_seed(0)
    net = build(a.model, 10).to(device)
    optimizer = make_optimizer(a, net.parameters())
    if a.synthetic:
        g = torch.Generator().manual_seed(rank)
        train_x = torch.randn(a.batch * 8, 3, a.image_size, a.image_size, generator=g)
        train_y = torch.randint(0, 10, (a.batch * 8,), generator=g)
        test = None
    else:
        train_x, train_y = fashion_mnist(a.data, "train", a.image_size)
        test = fashion_mnist(a.data, "t10k", a.image_size)
    per_epoch = len(train_x) // (a.batch * size)
    total = a.iterations or per_epoch * a.epochs
    decay = total if a.lr_schedule == "linear" else 0
    model = poseidon.DistributedModel(net, optimizer, name=a.model, scheme=a.scheme, mode=a.mode,
                                      cost_model=a.cost_model, lr_decay_iterations=decay,
                                      checkpoint_dir=a.checkpoint_dir, checkpoint_every=a.checkpoint_every,
                                      resume=a.resume)
    if model.start_iteration >= total:
        raise SystemExit(f"the checkpoint is at iteration {model.start_iteration} and this run has {total}: "
                         "nothing left to do")
    # Server mode decays lr on the servers; in gradient mode the optimizer does, as usual.
    scheduler = None
    if decay and model.mode == "gradient":
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: max(0.0, 1 - i / decay))
        model.checkpoint_objects.append(scheduler)  # saved and restored with the job
    if rank == 0:
        print(f"poseidon: {a.model} on {size} rank(s), {total} iterations of {a.batch} per rank, "
              f"{'synthetic' if a.synthetic else 'Fashion-MNIST'} {a.image_size}x{a.image_size}, "
              f"{a.optimizer} ({model.mode} mode), scheme {a.scheme}, on {device.type}", flush=True)
    times, loss, accuracy, started = [], float("nan"), None, time.time()
    first = it = model.start_iteration  # a resumed run skips what the saved one trained
    epoch = 0
    order = torch.Generator().manual_seed(1234)
    while it < total:
        perm = torch.randperm(len(train_x), generator=order)  # the same on every rank
        trained = False  # in this epoch, by this run (a resumed run evaluates no skipped epoch)
        for b in range(per_epoch):
            if epoch * per_epoch + b < it:
                continue
            if it >= total:
                break
            idx = perm[(b * size + rank) * a.batch:(b * size + rank + 1) * a.batch]
            t0 = time.perf_counter()
            out = model(train_x[idx].to(device, non_blocking=True))
            l = F.cross_entropy(out, train_y[idx].to(device, non_blocking=True))
            l.backward()
            optimizer.step()
            optimizer.zero_grad()
            if scheduler:
                scheduler.step()
            times.append(time.perf_counter() - t0)
            loss, it, trained = l.item(), it + 1, True
            if rank == 0 and (it % a.log_every == 0 or it == total):
                recent = statistics.median(times[-a.log_every:])
                print(f"iteration {it}/{total} loss {loss:.4f} {a.batch * size / recent:.1f} images/s", flush=True)
        epoch += 1
        if test is not None and trained and (it % per_epoch == 0 or it >= total):
            model.synchronize()
            accuracy = evaluate(model, test[0], test[1], rank, size, device)
            if rank == 0:
                print(f"after {it} iterations: test accuracy {100 * accuracy:.2f}%", flush=True)
    model.synchronize()
    digest, plan, sent = model.digest(), model.plan(), model.bytes_sent()
    model.close()
    s_per_iter = statistics.median(times[min(5, len(times) - 1):])
    if rank == 0:
        summary = {"workers": size, "model": a.model, "scheme": a.scheme, "mode": model.mode, "batch": a.batch,
                   "image_size": a.image_size, "device": device.type, "iterations": it, "s_per_iter_median": s_per_iter,
                   "images_per_s": a.batch * size / s_per_iter, "train_loss": loss, "test_accuracy": accuracy,
                   "bytes_sent_per_iter": sent / max(1, it - first), "param_digest": digest,
                   "wall_s": time.time() - started, "layers": plan}
        print(f"done: {it} iterations, {summary['images_per_s']:.1f} images/s, loss {loss:.4f}"
              + (f", test accuracy {100 * accuracy:.2f}%" if accuracy is not None else ""), flush=True)
        if a.json:
            print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
