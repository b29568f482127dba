#!/usr/bin/env python3
"""Issue 11's cost checks, side by side in one run: fcnet on 4 ranks (synthetic data, batch
32 per rank), each run alternating between
  - `old`: a `poseidon` binary built from the commit before the general adapter (--old),
  - `new`: this build, server-side SGD (the fast path the adapter must not slow down),
  - `gradient`: this build in gradient mode (--gradient-mode: the mean gradient into .grad,
    torch::optim::SGD steps locally on every rank).
Medians of --repeats rounds (s/iter, images/s) and the ratios new/old and gradient/new.
With --lab RATE (as root) every run is inside `poseidon lab` at that rate per rank; without,
ranks talk through shared memory. Usage:
  bench/general_adapter_cost.py --old /tmp/old/build/apps/poseidon [--poseidon build/apps/poseidon]
                         [--lab 1gbit] [--iterations 30] [--repeats 3] [--model fcnet]
"""
import argparse

from common import median, mpirun, run_json


def launch(binary, ranks, lab):
    if lab:
        return [binary, "lab", "--ranks", str(ranks), "--bandwidth", lab, "--", binary]
    return mpirun(ranks, binary)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--poseidon", default="build/apps/poseidon")
    ap.add_argument("--old", required=True, help="poseidon binary of the previous commit")
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lab", help="run in `poseidon lab` with this rate per rank, e.g. 1gbit")
    a = ap.parse_args()
    flags = ["train", "--model", a.model, "--synthetic", "--batch", str(a.batch), "--iterations",
             str(a.iterations), "--no-eval", "--json", "--threads", "1", "--lr-schedule", "constant"]
    configs = [("old", a.old, []), ("new", a.poseidon, []), ("gradient", a.poseidon, ["--gradient-mode"])]
    s_per_iter = {name: [] for name, _, _ in configs}
    for r in range(a.repeats):
        for name, binary, extra in configs:
            j = run_json(launch(binary, a.ranks, a.lab) + flags + extra)
            s_per_iter[name].append(j["s_per_iter_median"])
            print(f"round {r + 1} {name:9s} {j['s_per_iter_median']:.4f} s/iter {j['images_per_s']:.1f} images/s",
                  flush=True)
    med = {name: median(v) for name, v in s_per_iter.items()}
    where = f"each rank behind a {a.lab} link (poseidon lab)" if a.lab else "shared memory"
    print(f"\n{a.model}, {a.ranks} ranks, batch {a.batch} per rank, {where}, medians of {a.repeats} alternated rounds:")
    print("| build | s/iter | images/s |")
    print("|---|---|---|")
    for name, _, _ in configs:
        print(f"| {name} | {med[name]:.4f} | {a.ranks * a.batch / med[name]:.1f} |")
    print(f"new / old throughput: {med['old'] / med['new']:.3f}x; "
          f"gradient mode / server-side SGD throughput: {med['new'] / med['gradient']:.3f}x")
    for r in range(a.repeats):
        print(f"round {r + 1}: new/old {s_per_iter['old'][r] / s_per_iter['new'][r]:.3f}, "
              f"gradient/new {s_per_iter['new'][r] / s_per_iter['gradient'][r]:.3f}")


if __name__ == "__main__":
    main()
