#!/usr/bin/env python3
"""Figure 13 of Mamidala (2018) on this machine: time per 100 iterations of `poseidon train
--scheme allreduce` for each KVStore design (funnel, concurrent, chained), per model and
rank count, with the parameter server (--scheme ps) alongside for reference. Runs of one
(model, ranks) cell alternate between the designs, so drift hits them alike; medians of
--repeats runs. Usage:
  bench/papers/kvstore_designs.py [--poseidon build/apps/poseidon] [--models fcnet,convnet] [--ranks 1,2,4]
                        [--iterations 20] [--repeats 3] [--csv FILE] [--lab 1gbit]
With --lab (as root) every run is inside `poseidon lab` at that rate per rank; without,
ranks talk through shared memory (mpirun).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402
from benchlib.report import table_head, write_csv  # noqa: E402
from benchlib.rounds import alternated, median  # noqa: E402

DESIGNS = ["funnel", "concurrent", "chained"]
CONFIGS = dict([(d, ["--scheme", "allreduce", "--kvstore", d]) for d in DESIGNS] + [("ps", ["--scheme", "ps"])])


def cell(a, model, ranks):
    """Seconds per 100 iterations of each configuration, medians of alternated runs."""
    train = [a.poseidon, "train", "--model", model, "--synthetic", "--batch", str(a.batch), "--iterations",
             str(a.iterations), "--no-eval", "--json", "--threads", "1"]

    def run(name, r):
        s = run_ranks(a.poseidon, ranks, a.lab, train + CONFIGS[name])["s_per_iter_median"] * 100
        print(f"{model} {ranks} ranks run {r + 1} {name:10s} {s:7.2f} s/100 iterations", flush=True)
        return s

    seen = alternated(a.repeats, list(CONFIGS), run)
    return dict({"model": model, "ranks": ranks}, **{name: median(v) for name, v in seen.items()})


def main():
    ap = arguments(__doc__)
    ap.add_argument("--models", default="fcnet,convnet")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--csv")
    ap.add_argument("--lab", help="run in `poseidon lab` with this rate per rank, e.g. 1gbit")
    a = ap.parse_args()
    rows = [cell(a, model, ranks) for model in a.models.split(",") for ranks in map(int, a.ranks.split(","))]
    where = f", each rank behind a {a.lab} link (poseidon lab)" if a.lab else ", shared memory"
    print(f"\nseconds per 100 iterations (median of {a.repeats}), batch {a.batch} per rank, synthetic data{where}:")
    print(table_head("model", "ranks", "funnel", "concurrent", "chained", "ps (reference)", "concurrent / funnel",
                     "chained / funnel"))
    for row in rows:
        print(f"| {row['model']} | {row['ranks']} | {row['funnel']:.2f} | {row['concurrent']:.2f} | "
              f"{row['chained']:.2f} | {row['ps']:.2f} | {row['funnel'] / row['concurrent']:.2f}x | "
              f"{row['funnel'] / row['chained']:.2f}x |")
    if a.csv:
        write_csv(a.csv, rows, ["model", "ranks"] + list(CONFIGS))


if __name__ == "__main__":
    main()
