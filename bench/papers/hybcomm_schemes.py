#!/usr/bin/env python3
"""Side-by-side benchmark for HybComm (issue "Hybrid communication"): s/iter of `poseidon
train` at 4 ranks (mpirun, shared memory) with --scheme ps, sfb, auto with the bytes cost
model and auto with the time cost model, alternating runs so drift hits all alike; then the
layers where the two cost models disagree, with each model's reason. Usage:
  bench/papers/hybcomm_schemes.py [--poseidon build/apps/poseidon] [--model fcnet] [--iterations 20] [--repeats 3]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402
from benchlib.rounds import alternated, median  # noqa: E402

CONFIGS = {
    "ps": ["--scheme", "ps"],
    "sfb": ["--scheme", "sfb"],
    "auto(bytes)": ["--scheme", "auto", "--cost-model", "bytes"],
    "auto(time)": ["--scheme", "auto", "--cost-model", "time"],
}


def main():
    ap = arguments(__doc__)
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=4)
    a = ap.parse_args()
    train = [a.poseidon, "train", "--model", a.model, "--synthetic", "--batch", str(a.batch), "--iterations",
             str(a.iterations), "--no-eval", "--json", "--threads", "1"]

    def run(name, r):
        j = run_ranks(a.poseidon, a.ranks, None, train + CONFIGS[name])
        print(f"run {r + 1} {name:12s} {j['s_per_iter_median']:.3f} s/iter "
              f"{j['bytes_sent_per_iter'] / 1e6:8.2f} MB/iter sent per worker "
              f"schemes {','.join(l['scheme'] for l in j['layers'])}", flush=True)
        return j

    seen = alternated(a.repeats, list(CONFIGS), run)
    times = {name: [j["s_per_iter_median"] for j in runs] for name, runs in seen.items()}
    last = {name: runs[-1] for name, runs in seen.items()}
    ps = median(times["ps"])
    print(f"\n{a.model}, {a.ranks} ranks, batch {a.batch}, medians of {a.repeats} runs:")
    for name in CONFIGS:
        m = median(times[name])
        print(f"  {name:12s} {m:.3f} s/iter  ({ps / m:.2f}x the speed of ps)  "
              f"{last[name]['bytes_sent_per_iter'] / 1e6:.2f} MB/iter")
    print("\nlayers where the cost models disagree:")
    differ = [(lb, lt) for lb, lt in zip(last["auto(bytes)"]["layers"], last["auto(time)"]["layers"])
              if lb["scheme"] != lt["scheme"]]
    for lb, lt in differ:
        print(f"  {lb['name']}: bytes -> {lb['scheme']} ({lb['reason']}); time -> {lt['scheme']} ({lt['reason']})")
    if not differ:
        print("  none")


if __name__ == "__main__":
    main()
