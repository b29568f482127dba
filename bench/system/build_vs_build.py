#!/usr/bin/env python3
"""Throughput of two builds of the `poseidon` CLI side by side: fcnet on --ranks ranks,
each behind its own capped link (`poseidon lab`, root), synthetic data, batch 32 per rank,
server-side SGD and scheme auto; rounds alternate between the builds (the first build
first in odd rounds, second first in even ones), and the ratio of the medians (images/s)
is printed last. E.g. a commit against the one before (item 6 of the torch 2.x issue):
  git worktree add /tmp/base a57e818 && (cd /tmp/base && cmake -S . -B build ... && cmake --build build)
  sudo bench/system/build_vs_build.py --base /tmp/base/build/apps/poseidon --new build/apps/poseidon \\
      --lab 1gbit --ranks 4 --iterations 25 --repeats 5
The lab itself (namespaces, links) is made by --new's binary for both builds, so that
only the trainer differs. --python: the same model written in PyTorch
(bench/jobs/fcnet_python.py, DistributedModel's defaults) run with each build's Python
package (the `python/` folder beside its apps/: --base /tmp/base/build/apps/poseidon takes
/tmp/base/build/python).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, ENV, POSEIDON, PYTHON, script  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402
from benchlib.rounds import alternated, listed, median, ratios  # noqa: E402


def main():
    ap = arguments(__doc__, poseidon=False)
    ap.add_argument("--base", required=True, help="the build compared against (its poseidon binary)")
    ap.add_argument("--new", default=POSEIDON, help="the build measured (default: this tree's)")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--lab", default="1gbit", help="each rank's link rate")
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--python", action="store_true", help="the PyTorch job through each build's Python package")
    a = ap.parse_args()
    train = ["train", "--model", a.model, "--synthetic", "--batch", "32", "--iterations", str(a.iterations),
             "--no-eval", "--json", "--threads", "1", "--lr-schedule", "constant"]

    job = [PYTHON, script("jobs/fcnet_python.py"), "--model", a.model, "--iterations", str(a.iterations)]

    def run(name, r):
        binary = a.base if name == "base" else a.new
        if a.python:
            ENV["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))), "python")
        ips = run_ranks(a.new, a.ranks, a.lab, job if a.python else [binary] + train)["images_per_s"]
        print(f"round {r + 1} {name:4s} {ips:.1f} images/s", flush=True)
        return ips

    seen = alternated(a.repeats, ["base", "new"], run, swap=True)
    base, new = median(seen["base"]), median(seen["new"])
    print(f"{a.model}{' (Python)' if a.python else ''}, {a.ranks} ranks, {a.lab} per rank, {a.repeats} rounds: base median {base:.1f} images/s, "
          f"new median {new:.1f}; new/base ratio of medians {new / base:.3f} "
          f"(per-round ratios {listed(ratios(seen['new'], seen['base']))})")


if __name__ == "__main__":
    main()
