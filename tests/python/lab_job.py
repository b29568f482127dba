#!/usr/bin/env python3
"""A Python job inside `poseidon lab` (2 ranks, each behind its own 100mbit link): it must
train (the loss falls), end with the same parameters as the same job under plain mpirun
(the digest), and leave no network namespace behind. Needs root: skipped (exit 77) without.

    tests/python/lab_job.py --poseidon build/apps/poseidon
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples/python/minimal.py")
SKIP = 77


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("psd")}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[:6])} ... exited {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    losses = [float(x) for x in re.findall(r"step \d+ loss ([0-9.]+)", p.stdout)]
    done = re.search(r"done: loss ([0-9.]+), digest ([0-9a-f]+)", p.stdout)
    if not losses or not done:
        sys.exit(f"no progress or summary in the output:\n{p.stdout[-1500:]}")
    return losses[0], float(done.group(1)), done.group(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--poseidon", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: the lab needs root (network namespaces)")
        sys.exit(SKIP)
    before = namespaces()
    job = [sys.executable, SCRIPT]
    first, last, lab_digest = run([a.poseidon, "lab", "--ranks", "2", "--bandwidth", "100mbit", "--"] + job)
    print(f"in the lab: loss {first:.4f} -> {last:.4f}, digest {lab_digest}")
    left = namespaces() - before
    if left:
        sys.exit(f"namespaces left behind: {sorted(left)}")
    if not last < 0.7 * first:
        sys.exit(f"the lab job did not train: loss {first} -> {last}")
    _, _, plain_digest = run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"] + job)
    print(f"under plain mpirun: digest {plain_digest}")
    if plain_digest != lab_digest:
        sys.exit("the lab job ended with other parameters than the same job under plain mpirun")
    print("passed: lab_job")


if __name__ == "__main__":
    main()
