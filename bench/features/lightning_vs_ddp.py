#!/usr/bin/env python3
"""Issue 63's speed check: does Poseidon keep its lead over DDP under PyTorch Lightning? For
each model (fcnet, convnet; bench/jobs/fcnet_python.py's nets), --ranks ranks each behind a
--lab link, alternating in each round between
  - lightning-poseidon: Trainer(strategy=poseidon.lightning.PoseidonStrategy()),
  - lightning-ddp:      Trainer(strategy=DDPStrategy(process_group_backend="gloo")),
  - plain-poseidon:     a plain loop with poseidon.DistributedModel,
  - plain-ddp:          a plain loop with DistributedDataParallel (gloo),
all on bench/jobs/lightning_train.py (SGD with momentum, batch 32 per rank, synthetic data).
Prints medians of --repeats rounds, the ratio Poseidon/DDP under Lightning and in the plain
loop (medians and paired), and the one over the other. Root (the lab):
  sudo bench/features/lightning_vs_ddp.py --lab 1gbit --ranks 4 --iterations 25 --repeats 3
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, made_by, PYTHON, require_root, script, use_build_python  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402
from benchlib.rounds import alternated, listed, median, ratios  # noqa: E402

SYSTEMS = ("lightning-poseidon", "lightning-ddp", "plain-poseidon", "plain-ddp")


def main():
    ap = arguments(__doc__)
    ap.add_argument("--models", default="fcnet,convnet")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--lab", default="1gbit", help="each rank's link rate in `poseidon lab`")
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    require_root()
    use_build_python()
    print(made_by())
    for model in a.models.split(","):
        def run(name, r):
            loop, strategy = name.split("-")
            job = [PYTHON, script("jobs/lightning_train.py"), "--loop", loop, "--strategy", strategy, "--model", model,
                   "--iterations", str(a.iterations)]
            ips = run_ranks(a.poseidon, a.ranks, a.lab, job)["images_per_s"]
            print(f"{model} round {r + 1} {name:18s} {ips:.1f} images/s", flush=True)
            return ips

        seen = alternated(a.repeats, list(SYSTEMS), run)
        print(f"\n{model}, {a.ranks} ranks each behind a {a.lab} link, batch 32 per rank, medians of {a.repeats} "
              "alternated rounds:")
        for name in SYSTEMS:
            print(f"| {name} | {median(seen[name]):.1f} images/s | rounds {listed(seen[name], 1)} |")
        under = {loop: median(seen[f"{loop}-poseidon"]) / median(seen[f"{loop}-ddp"]) for loop in ("lightning", "plain")}
        for loop in ("lightning", "plain"):
            paired = ratios(seen[f"{loop}-poseidon"], seen[f"{loop}-ddp"])
            print(f"{loop}: Poseidon / DDP {under[loop]:.3f}x (medians); paired {listed(paired)}")
        print(f"{model}: the Lightning ratio over the plain-loop ratio: {under['lightning'] / under['plain']:.3f}\n")


if __name__ == "__main__":
    main()
