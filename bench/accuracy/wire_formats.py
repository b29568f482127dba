#!/usr/bin/env python3
"""Accuracy of 16-bit wires (issue 38): each model trained for --epochs on Fashion-MNIST by
--workers ranks with --wire fp32 (exact), bf16 and fp16, each 16-bit wire without and with
error feedback ("bf16+ef": --error-feedback), same seed and options; prints each test
accuracy and its gap to fp32 (the acceptance: within 0.3 points). --scheme ps puts every
layer through the parameter server, --scheme allreduce every layer through the 16-bit
allreduce (with "+ef", its residuals carried too): either way every layer the wire changes. Usage:
  bench/accuracy/wire_formats.py [--models fcnet,resnet] [--workers 4] [--epochs 1] [--scheme ps]
                                 [--wires fp32,bf16,fp16,bf16+ef,fp16+ef]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402


def main():
    ap = arguments(__doc__)
    ap.add_argument("--models", default="fcnet,resnet")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--scheme", default="ps")
    ap.add_argument("--wires", default="fp32,bf16,fp16,bf16+ef,fp16+ef")
    ap.add_argument("--seed", default="42")
    a = ap.parse_args()
    wires = a.wires.split(",")  # without fp32 first: no gaps (compare with an fp32 run's line)
    for model in a.models.split(","):
        acc = {}
        for wire in wires:
            feedback = ["--error-feedback"] if wire.endswith("+ef") else []
            r = run_ranks(a.poseidon, a.workers, None,
                          [a.poseidon, "train", "--model", model, "--epochs", str(a.epochs), "--json", "--scheme",
                           a.scheme, "--wire", wire.removesuffix("+ef"), "--seed", a.seed] + feedback, timeout=7200)
            acc[wire] = r["test_accuracy"]
            gap = f" (gap to fp32 {acc[wire] - acc['fp32']:+.2f} points)" if "fp32" in acc else ""
            print(f"{model}, {a.workers} workers, {a.epochs} epoch(s), scheme {a.scheme}, wire {wire}: test accuracy "
                  f"{acc[wire]:.2f}%{gap}, train loss "
                  f"{r['train_loss']:.4f}, {r['bytes_sent_per_iter'] / 1e6:.1f} MB sent per rank per iteration",
                  flush=True)


if __name__ == "__main__":
    main()
