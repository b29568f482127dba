#!/usr/bin/env python3
"""Side-by-side benchmark for HybComm (issue "Hybrid communication"): s/iter of `poseidon
train` at 4 ranks with --scheme ps, sfb, auto with the bytes cost model and auto with the
time cost model, alternating runs so drift hits all alike; then the layers where the two
cost models disagree, with each model's reason. Usage:
  bench/hybcomm_schemes.py [--poseidon build/apps/poseidon] [--model fcnet] [--iterations 20] [--repeats 3]
"""
import argparse

from common import median, mpirun, run_json

CONFIGS = [
    ("ps", ["--scheme", "ps"]),
    ("sfb", ["--scheme", "sfb"]),
    ("auto(bytes)", ["--scheme", "auto", "--cost-model", "bytes"]),
    ("auto(time)", ["--scheme", "auto", "--cost-model", "time"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--poseidon", default="build/apps/poseidon")
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=4)
    a = ap.parse_args()
    base = mpirun(a.ranks, a.poseidon) + ["train", "--model", a.model, "--synthetic", "--batch", str(a.batch),
                                          "--iterations", str(a.iterations), "--no-eval", "--json", "--threads", "1"]
    times = {name: [] for name, _ in CONFIGS}
    last = {}
    for r in range(a.repeats):
        for name, flags in CONFIGS:
            j = run_json(base + flags)
            times[name].append(j["s_per_iter_median"])
            last[name] = j
            print(f"run {r + 1} {name:12s} {j['s_per_iter_median']:.3f} s/iter "
                  f"{j['bytes_sent_per_iter'] / 1e6:8.2f} MB/iter sent per worker "
                  f"schemes {','.join(l['scheme'] for l in j['layers'])}", flush=True)
    ps = median(times["ps"])
    print(f"\n{a.model}, {a.ranks} ranks, batch {a.batch}, medians of {a.repeats} runs:")
    for name, _ in CONFIGS:
        m = median(times[name])
        print(f"  {name:12s} {m:.3f} s/iter  ({ps / m:.2f}x the speed of ps)  "
              f"{last[name]['bytes_sent_per_iter'] / 1e6:.2f} MB/iter")
    print("\nlayers where the cost models disagree:")
    any_diff = False
    for lb, lt in zip(last["auto(bytes)"]["layers"], last["auto(time)"]["layers"]):
        if lb["scheme"] != lt["scheme"]:
            any_diff = True
            print(f"  {lb['name']}: bytes -> {lb['scheme']} ({lb['reason']}); time -> {lt['scheme']} ({lt['reason']})")
    if not any_diff:
        print("  none")


if __name__ == "__main__":
    main()
