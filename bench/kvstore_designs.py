#!/usr/bin/env python3
"""Figure 13 of Mamidala (2018) on this machine: time per 100 iterations of `poseidon train
--scheme allreduce` for each KVStore design (funnel, concurrent, chained), per model and
rank count, with the parameter server (--scheme ps) alongside for reference. Runs of one
(model, ranks) cell alternate between the designs, so drift hits them alike; medians of
--repeats runs. Usage:
  bench/kvstore_designs.py [--poseidon build/apps/poseidon] [--models fcnet,convnet] [--ranks 1,2,4]
                        [--iterations 20] [--repeats 3] [--csv FILE] [--lab 1gbit]
With --lab (as root) every run is inside `poseidon lab` at that rate per rank.
"""
import argparse
import csv

from common import median, mpirun, run_json

DESIGNS = ["funnel", "concurrent", "chained"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--poseidon", default="build/apps/poseidon")
    ap.add_argument("--models", default="fcnet,convnet")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--csv")
    ap.add_argument("--lab", help="run in `poseidon lab` with this rate per rank, e.g. 1gbit")
    a = ap.parse_args()
    configs = [(d, ["--scheme", "allreduce", "--kvstore", d]) for d in DESIGNS] + [("ps", ["--scheme", "ps"])]
    rows = []
    for model in a.models.split(","):
        for ranks in [int(r) for r in a.ranks.split(",")]:
            launch = ([a.poseidon, "lab", "--ranks", str(ranks), "--bandwidth", a.lab, "--", a.poseidon]
                      if a.lab else mpirun(ranks, a.poseidon))
            base = launch + ["train", "--model", model, "--synthetic", "--batch", str(a.batch),
                                                "--iterations", str(a.iterations), "--no-eval", "--json",
                                                "--threads", "1"]
            times = {name: [] for name, _ in configs}
            for r in range(a.repeats):
                for name, flags in configs:
                    j = run_json(base + flags)
                    times[name].append(j["s_per_iter_median"] * 100)
                    print(f"{model} {ranks} ranks run {r + 1} {name:10s} {times[name][-1]:7.2f} s/100 iterations",
                          flush=True)
            row = {"model": model, "ranks": ranks}
            for name, _ in configs:
                row[name] = median(times[name])
            rows.append(row)
    where = f", each rank behind a {a.lab} link (poseidon lab)" if a.lab else ", shared memory"
    print(f"\nseconds per 100 iterations (median of {a.repeats}), batch {a.batch} per rank, synthetic data{where}:")
    print("| model | ranks | funnel | concurrent | chained | ps (reference) | concurrent / funnel | chained / funnel |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['model']} | {row['ranks']} | {row['funnel']:.2f} | {row['concurrent']:.2f} | "
              f"{row['chained']:.2f} | {row['ps']:.2f} | {row['funnel'] / row['concurrent']:.2f}x | "
              f"{row['funnel'] / row['chained']:.2f}x |")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["model", "ranks"] + [n for n, _ in configs])
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
