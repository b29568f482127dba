#!/usr/bin/env python3
"""Scaling with emulated compute (issue 5): a profile of one rank's real per-layer compute
(`poseidon train --profile-out`), then `poseidon train --emulate-compute` at several rank
counts and link rates inside `poseidon lab`: compute is waits, every byte is real. Prints a
markdown table of images/s and speedup over one rank's emulated compute. Needs root.
  sudo bench/papers/emulated_scaling.py [--model fcnet] [--ranks 2,4,8,16] [--bandwidths 1gbit,10gbit]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, require_root  # noqa: E402
from benchlib.lab import run, run_ranks  # noqa: E402
from benchlib.report import table_head  # noqa: E402

SCHEMES = {"ps": ["--scheme", "ps"], "auto": ["--scheme", "auto", "--cost-model", "bytes"]}


def compute_ms(a):
    """One rank's compute per iteration (ms): the profile's layers and the rest, forward and backward."""
    if os.path.exists(a.profile):
        os.remove(a.profile)
    run([a.poseidon, "train", "--model", a.model, "--iterations", "12", "--synthetic", "--no-eval", "--threads", "1",
         "--scheme", "ps", "--profile-out", a.profile])
    per_iter = 0.0
    with open(a.profile) as f:
        for line in f:
            w = line.split()
            if w and w[0] in ("layer", "other"):
                per_iter += float(w[-3]) + float(w[-1])
    return per_iter


def main():
    ap = arguments(__doc__)
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--ranks", default="2,4,8,16")
    ap.add_argument("--bandwidths", default="1gbit,10gbit")
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--profile", default="/tmp/poseidon-emulated.profile")
    a = ap.parse_args()
    require_root()
    per_iter = compute_ms(a)
    one = 32 / (per_iter / 1000)
    print(f"profile {a.profile}: {per_iter:.1f} ms of compute per iteration = {one:.1f} images/s on one rank")
    print(table_head("link", "ranks", "ps images/s", "ps speedup", "poseidon (auto) images/s", "poseidon speedup",
                     "schemes"))
    job = ["poseidon", "train", "--model", a.model, "--emulate-compute", a.profile, "--iterations", str(a.iterations),
           "--json"]
    for bw in a.bandwidths.split(","):
        for n in map(int, a.ranks.split(",")):
            out = {name: run_ranks(a.poseidon, n, bw, job + flags) for name, flags in SCHEMES.items()}
            ps, au = out["ps"]["images_per_s"], out["auto"]["images_per_s"]
            print(f"| {bw} | {n} | {ps:.1f} | {ps / one:.2f}x | {au:.1f} | {au / one:.2f}x | "
                  f"{','.join(l['scheme'] for l in out['auto']['layers'])} |", flush=True)


if __name__ == "__main__":
    main()
