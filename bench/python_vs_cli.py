#!/usr/bin/env python3
"""Issue 12's cost check: does the Python path cost anything? fcnet on --ranks ranks,
synthetic data, batch 32 per rank, alternating in each round between
  - `cli`:    build/apps/poseidon train --model fcnet (LibTorch, C++),
  - `python`: bench/fcnet_python.py (the same net in PyTorch, poseidon.DistributedModel),
both with server-side SGD and scheme auto. Medians of --repeats rounds and the paired
ratios python/cli (images/s). With --lab RATE (as root) every run is in `poseidon lab`.
  bench/python_vs_cli.py --lab 1gbit --iterations 25 --repeats 5
"""
import sys
import argparse
import os

from common import ENV, POSEIDON, ROOT, median, run_json, PYTHON

PY = PYTHON  # the project's python (.venv), with torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--poseidon", default=POSEIDON)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lab", help="run in `poseidon lab` with this rate per rank, e.g. 1gbit")
    a = ap.parse_args()
    ENV["PYTHONPATH"] = os.path.join(ROOT, "build/python")
    launch = ([a.poseidon, "lab", "--ranks", str(a.ranks), "--bandwidth", a.lab, "--"] if a.lab
              else ["mpirun", "-np", str(a.ranks), "--oversubscribe"])
    runs = {
        "cli": launch + [a.poseidon, "train", "--model", "fcnet", "--synthetic", "--batch", "32", "--iterations",
                         str(a.iterations), "--no-eval", "--json", "--threads", "1", "--lr-schedule", "constant"],
        "python": launch + [PY, os.path.join(ROOT, "bench/fcnet_python.py"), "--iterations", str(a.iterations)],
    }
    seen = {name: [] for name in runs}
    for r in range(a.repeats):
        for name, cmd in runs.items():
            seen[name].append(run_json(cmd)["images_per_s"])
            print(f"round {r + 1} {name:7s} {seen[name][-1]:.1f} images/s", flush=True)
    where = f"each rank behind a {a.lab} link (poseidon lab)" if a.lab else "shared memory"
    print(f"\nfcnet, {a.ranks} ranks, batch 32 per rank, {where}, medians of {a.repeats} alternated rounds:")
    for name in runs:
        print(f"| {name} | {median(seen[name]):.1f} images/s |")
    paired = [p / c for p, c in zip(seen["python"], seen["cli"])]
    print(f"python / cli: {median(seen['python']) / median(seen['cli']):.3f}x (medians); paired "
          f"{', '.join(f'{x:.3f}' for x in paired)}; median of paired {median(paired):.3f}x")


if __name__ == "__main__":
    main()
