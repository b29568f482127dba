#!/usr/bin/env python3
"""The backbone's two side-by-side checks (issue "Distributed training end to end"):

1. One worker: `poseidon train` against the plain LibTorch loop (`--baseline`) on the same
   model, batch, data and threads; runs alternate so drift hits both alike.
2. Four workers (mpirun, shared memory): WFBP against --no-wfbp, s/iter.
Prints each run and the medians and ratios. Usage:
  bench/papers/wfbp_and_plain_loop.py [--poseidon build/apps/poseidon] [--model fcnet] [--iterations 30] [--repeats 5]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.lab import run_json, run_ranks  # noqa: E402
from benchlib.rounds import alternated, listed, median, ratios  # noqa: E402


def single_worker(a, train):
    """Poseidon on one worker against the plain loop, images/s."""
    def run(name, r):
        ips = run_json([a.poseidon] + train + (["--baseline"] if name == "plain" else []))["images_per_s"]
        print(f"1 worker, run {r + 1}: {name} {ips:.1f} images/s", flush=True)
        return ips

    seen = alternated(a.repeats, ["plain", "poseidon"], run)
    plain, pos = seen["plain"], seen["poseidon"]
    print(f"1 worker, poseidon / plain per run: {listed(ratios(pos, plain))}")
    print(f"1 worker {a.model}: plain median {median(plain):.1f} images/s, poseidon median "
          f"{median(pos):.1f} images/s, ratio of medians {median(pos) / median(plain):.3f}, median of paired ratios "
          f"{median(ratios(pos, plain)):.3f}")


def wfbp(a, train):
    """WFBP against every sync after the whole backward, s/iter on a.ranks workers."""
    def run(name, r):
        j = run_ranks(a.poseidon, a.ranks, None, [a.poseidon] + train + (["--no-wfbp"] if name == "no WFBP" else []))
        print(f"{a.ranks} workers, run {r + 1}: {name} {j['s_per_iter_median']:.3f} s/iter", flush=True)
        return j["s_per_iter_median"]

    seen = alternated(a.repeats, ["WFBP", "no WFBP"], run)
    on, off = seen["WFBP"], seen["no WFBP"]
    print(f"{a.ranks} workers {a.model}: WFBP median {median(on):.3f} s/iter, no-WFBP median "
          f"{median(off):.3f} s/iter, speedup {median(off) / median(on):.3f}x")


def main():
    ap = arguments(__doc__)
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--skip-wfbp", action="store_true")
    a = ap.parse_args()
    train = ["train", "--scheme", "ps", "--model", a.model, "--synthetic", "--batch", str(a.batch), "--iterations",
             str(a.iterations), "--no-eval", "--json", "--threads", "1"]
    if not a.skip_single:
        single_worker(a, train)
    if not a.skip_wfbp:
        wfbp(a, train)


if __name__ == "__main__":
    main()
