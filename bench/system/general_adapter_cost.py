#!/usr/bin/env python3
"""Issue 11's cost checks, side by side in one run: fcnet on 4 ranks (synthetic data, batch
32 per rank), each run alternating between
  - `old`: a `poseidon` binary built from the commit before the general adapter (--old),
  - `new`: this build, server-side SGD (the fast path the adapter must not slow down),
  - `gradient`: this build in gradient mode (--gradient-mode: the mean gradient into .grad,
    torch::optim::SGD steps locally on every rank).
Medians of --repeats rounds (s/iter, images/s) and the ratios new/old and gradient/new.
With --lab RATE (as root) every run is inside `poseidon lab` at that rate per rank (a lab
each build makes itself); without, ranks talk through shared memory. Usage:
  bench/system/general_adapter_cost.py --old /tmp/old/build/apps/poseidon [--poseidon build/apps/poseidon]
                         [--lab 1gbit] [--iterations 30] [--repeats 3] [--model fcnet]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402
from benchlib.report import table_head  # noqa: E402
from benchlib.rounds import alternated, median, ratios  # noqa: E402


def main():
    ap = arguments(__doc__)
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
    configs = {"old": (a.old, []), "new": (a.poseidon, []), "gradient": (a.poseidon, ["--gradient-mode"])}

    def run(name, r):
        binary, extra = configs[name]
        j = run_ranks(binary, a.ranks, a.lab, [binary] + flags + extra)
        print(f"round {r + 1} {name:9s} {j['s_per_iter_median']:.4f} s/iter {j['images_per_s']:.1f} images/s",
              flush=True)
        return j["s_per_iter_median"]

    s_per_iter = alternated(a.repeats, list(configs), run)
    med = {name: median(v) for name, v in s_per_iter.items()}
    where = f"each rank behind a {a.lab} link (poseidon lab)" if a.lab else "shared memory"
    print(f"\n{a.model}, {a.ranks} ranks, batch {a.batch} per rank, {where}, medians of {a.repeats} alternated rounds:")
    print(table_head("build", "s/iter", "images/s"))
    for name in configs:
        print(f"| {name} | {med[name]:.4f} | {a.ranks * a.batch / med[name]:.1f} |")
    print(f"new / old throughput: {med['old'] / med['new']:.3f}x; "
          f"gradient mode / server-side SGD throughput: {med['new'] / med['gradient']:.3f}x")
    new_old = ratios(s_per_iter["old"], s_per_iter["new"])
    gradient_new = ratios(s_per_iter["new"], s_per_iter["gradient"])
    for r in range(a.repeats):
        print(f"round {r + 1}: new/old {new_old[r]:.3f}, gradient/new {gradient_new[r]:.3f}")


if __name__ == "__main__":
    main()
