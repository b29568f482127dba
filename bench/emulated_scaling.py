#!/usr/bin/env python3
"""Scaling with emulated compute (issue 5): a profile of one rank's real per-layer compute
(`poseidon train --profile-out`), then `poseidon train --emulate-compute` at several rank
counts and link rates inside `poseidon lab`: compute is waits, every byte is real. Prints a
markdown table of images/s and speedup over one rank's emulated compute. Needs root.
  sudo bench/emulated_scaling.py [--model fcnet] [--ranks 2,4,8,16] [--bandwidths 1gbit,10gbit]
"""
import argparse
import os
import subprocess
import sys

from common import ENV, POSEIDON, run_json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--poseidon", default=POSEIDON)
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--ranks", default="2,4,8,16")
    ap.add_argument("--bandwidths", default="1gbit,10gbit")
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--profile", default="/tmp/poseidon-emulated.profile")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("the lab needs root")
    if os.path.exists(a.profile):
        os.remove(a.profile)
    subprocess.run([a.poseidon, "train", "--model", a.model, "--iterations", "12", "--synthetic", "--no-eval",
                    "--threads", "1", "--scheme", "ps", "--profile-out", a.profile], check=True, env=ENV,
                   capture_output=True)
    per_iter = 0.0
    with open(a.profile) as f:
        for line in f:
            w = line.split()
            if w and w[0] in ("layer", "other"):
                per_iter += float(w[-3]) + float(w[-1])
    one = 32 / (per_iter / 1000)
    print(f"profile {a.profile}: {per_iter:.1f} ms of compute per iteration = {one:.1f} images/s on one rank")
    print("| link | ranks | ps images/s | ps speedup | poseidon (auto) images/s | poseidon speedup | schemes |")
    print("|---|---|---|---|---|---|---|")
    for bw in a.bandwidths.split(","):
        for n in [int(r) for r in a.ranks.split(",")]:
            out = {}
            for name, flags in [("ps", ["--scheme", "ps"]), ("auto", ["--scheme", "auto", "--cost-model", "bytes"])]:
                out[name] = run_json([a.poseidon, "lab", "--ranks", str(n), "--bandwidth", bw, "--", "poseidon",
                                      "train", "--model", a.model, "--emulate-compute", a.profile, "--iterations",
                                      str(a.iterations), "--json"] + flags)
            ps, au = out["ps"]["images_per_s"], out["auto"]["images_per_s"]
            print(f"| {bw} | {n} | {ps:.1f} | {ps / one:.2f}x | {au:.1f} | {au / one:.2f}x | "
                  f"{','.join(l['scheme'] for l in out['auto']['layers'])} |", flush=True)


if __name__ == "__main__":
    main()
