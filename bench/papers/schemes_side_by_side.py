#!/usr/bin/env python3
"""Poseidon's schemes side by side on a torchvision model, each job in `poseidon lab` on 4
ranks behind the given link, alternated within each round; prints every run and the
medians. Made the "why" figures of docs/benchmarks/allreduce-on-ties.txt. Usage (as root):
  bench/papers/schemes_side_by_side.py MODEL LINK ROUNDS SYSTEM[:SCHEME] ...
  e.g.  bench/papers/schemes_side_by_side.py googlenet 10gbit 2 ddp poseidon:auto poseidon:allreduce
SYSTEM is one of bench/jobs/torchvision_train.py's --system values; SCHEME its --scheme.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import POSEIDON, ROOT, like_poseidon, use_build_python  # noqa: E402
from benchlib.jobs import torchvision_train  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    like_poseidon()
    use_build_python(os.path.join(ROOT, "build/python"))
    model, link, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    variants = [v.split(":") for v in sys.argv[4:]]
    seen = {":".join(v): [] for v in variants}
    for r in range(rounds):
        for i, v in enumerate(variants):
            extra = ["--scheme", v[1]] if len(v) > 1 else []
            job = torchvision_train(v[0], model, 8, ["--device", "cpu", "--port", str(29700 + 10 * r + i)] + extra)
            j = run_ranks(POSEIDON, 4, link, job, timeout=900)
            seen[":".join(v)].append(j["images_per_s"])
            print(r, ":".join(v), round(j["images_per_s"], 1), j.get("mode", ""), flush=True)
    for k, s in seen.items():
        print(k, "median", round(statistics.median(s), 1), s)


if __name__ == "__main__":
    main()
