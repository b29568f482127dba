#!/usr/bin/env python3
"""Accuracy acceptance of the backbone: a model trained by N workers at batch B per worker
against one worker at batch N*B (the same global batch), same learning rate and
iterations, on Fashion-MNIST; prints both test accuracies and the gap. Usage:
  bench/accuracy/workers_vs_large_batch.py [--model convnet] [--workers 4] [--batch 32] [--iterations 200] [--lr X]
Without --lr both runs use the model's recommended rate.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402


def main():
    ap = arguments(__doc__)
    ap.add_argument("--model", default="convnet")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--lr", default=None)
    ap.add_argument("--scheme", default="auto")
    a = ap.parse_args()
    train = [a.poseidon, "train", "--model", a.model, "--iterations", str(a.iterations), "--json", "--scheme", a.scheme]
    if a.lr:
        train += ["--lr", a.lr]
    dist = run_ranks(a.poseidon, a.workers, None, train + ["--batch", str(a.batch)])
    single = run_ranks(a.poseidon, 1, None, train + ["--batch", str(a.batch * a.workers), "--threads", "2"])
    gap = dist["test_accuracy"] - single["test_accuracy"]
    print(f"{a.model}, {a.iterations} iterations, lr {dist['lr']:g}: {a.workers} workers x batch {a.batch}: "
          f"{dist['test_accuracy']:.2f}%; 1 worker x batch {a.batch * a.workers}: {single['test_accuracy']:.2f}%; "
          f"gap {gap:+.2f} points")


if __name__ == "__main__":
    main()
