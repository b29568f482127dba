#!/usr/bin/env python3
"""Issue 12's cost check: does the Python path cost anything? fcnet on --ranks ranks,
synthetic data, batch 32 per rank, alternating in each round between
  - `cli`:    build/apps/poseidon train --model fcnet (LibTorch, C++),
  - `python`: bench/jobs/fcnet_python.py (the same net in PyTorch, poseidon.DistributedModel),
both with server-side SGD and scheme auto. Medians of --repeats rounds and the paired
ratios python/cli (images/s). With --lab RATE (as root) every run is in `poseidon lab`.
  bench/system/python_vs_cli.py --lab 1gbit --iterations 25 --repeats 5
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, PYTHON, script, use_build_python  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402
from benchlib.rounds import alternated, listed, median, ratios  # noqa: E402


def main():
    ap = arguments(__doc__)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lab", help="run in `poseidon lab` with this rate per rank, e.g. 1gbit")
    a = ap.parse_args()
    use_build_python()
    programs = {
        "cli": [a.poseidon, "train", "--model", "fcnet", "--synthetic", "--batch", "32", "--iterations",
                str(a.iterations), "--no-eval", "--json", "--threads", "1", "--lr-schedule", "constant"],
        "python": [PYTHON, script("jobs/fcnet_python.py"), "--iterations", str(a.iterations)],
    }

    def run(name, r):
        ips = run_ranks(a.poseidon, a.ranks, a.lab, programs[name])["images_per_s"]
        print(f"round {r + 1} {name:7s} {ips:.1f} images/s", flush=True)
        return ips

    seen = alternated(a.repeats, list(programs), run)
    where = f"each rank behind a {a.lab} link (poseidon lab)" if a.lab else "shared memory"
    print(f"\nfcnet, {a.ranks} ranks, batch 32 per rank, {where}, medians of {a.repeats} alternated rounds:")
    for name in programs:
        print(f"| {name} | {median(seen[name]):.1f} images/s |")
    paired = ratios(seen["python"], seen["cli"])
    print(f"python / cli: {median(seen['python']) / median(seen['cli']):.3f}x (medians); paired "
          f"{listed(paired)}; median of paired {median(paired):.3f}x")


if __name__ == "__main__":
    main()
