#!/usr/bin/env python3
"""What the DDP/Horovod contract costs in server mode: optimizer.step() returning once every
parameter holds its new value (DistributedModel's default) against the paper's overlap
(overlap_step=True: the lower layers' new values arrive during the next forward). fcnet
and convnet in PyTorch (bench/jobs/fcnet_python.py) on --ranks ranks, each behind its own
capped link (`poseidon lab`, root), alternated rounds; medians and the ratio default/overlap.
  sudo bench/system/step_wait_cost.py --lab 1gbit --models fcnet,convnet --iterations 25 --repeats 5
--against server: the default (mode "auto": the first iteration on the workers, then the
servers) against mode="server" from the start (what "auto" chose for SGD before); the steady
state (median step from the fourth) and the first three steps' seconds (the decision and
the second session's start) side by side.
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
    ap.add_argument("--lab", default="1gbit", help="each rank's link rate")
    ap.add_argument("--models", default="fcnet,convnet")
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--against", default="overlap", choices=("overlap", "server"))
    a = ap.parse_args()
    use_build_python()
    for model in a.models.split(","):
        job = [PYTHON, script("jobs/fcnet_python.py"), "--model", model, "--iterations", str(a.iterations)]

        other = {"overlap": ["--overlap-step"], "server": ["--mode", "server"]}[a.against]
        first = {"default": [], a.against: []}

        def run(name, r):
            ips = run_ranks(a.poseidon, a.ranks, a.lab, job + (other if name == a.against else []))
            first[name].append(ips.get("first_3_steps_s", float("nan")))
            print(f"{model} round {r + 1} {name:8s} {ips['images_per_s']:.1f} images/s, mode {ips.get('mode')}, "
                  f"first 3 steps {first[name][-1]:.2f} s", flush=True)
            return ips["images_per_s"]

        seen = alternated(a.repeats, ["default", a.against], run, swap=True)
        paired = ratios(seen["default"], seen[a.against])
        print(f"{model}: default {median(seen['default']):.1f}, {a.against} {median(seen[a.against]):.1f} "
              f"images/s; ratio of medians {median(seen['default']) / median(seen[a.against]):.3f}; "
              f"per round {listed(paired)}; first 3 steps (median s) default {median(first['default']):.2f}, "
              f"{a.against} {median(first[a.against]):.2f}", flush=True)


if __name__ == "__main__":
    main()
