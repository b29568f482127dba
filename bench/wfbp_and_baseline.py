#!/usr/bin/env python3
"""Side-by-side benchmark for the backbone (issue "Distributed training end to end").

1. One worker: `poseidon train` against the plain LibTorch loop (`--baseline`) on the same
   model, batch, data and threads; runs alternate so drift hits both alike.
2. Four workers: WFBP against --no-wfbp, s/iter.
Prints each run and the medians and ratios. Usage:
  bench/wfbp_and_baseline.py [--poseidon build/apps/poseidon] [--model fcnet] [--iterations 30] [--repeats 5]
"""
import argparse
import statistics

from common import mpirun, run_json as run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--poseidon", default="build/apps/poseidon")
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--skip-wfbp", action="store_true")
    a = ap.parse_args()
    common = ["train", "--scheme", "ps", "--model", a.model, "--synthetic", "--batch", str(a.batch), "--iterations",
              str(a.iterations), "--no-eval", "--json", "--threads", "1"]

    if not a.skip_single:
        plain, pos = [], []
        for r in range(a.repeats):
            p = run([a.poseidon] + common + ["--baseline"])
            q = run([a.poseidon] + common)
            plain.append(p["images_per_s"])
            pos.append(q["images_per_s"])
            print(f"1 worker, run {r + 1}: plain LibTorch {p['images_per_s']:.1f} images/s, "
                  f"poseidon {q['images_per_s']:.1f} images/s, ratio {q['images_per_s'] / p['images_per_s']:.3f}",
                  flush=True)
        ratios = [q / p for p, q in zip(plain, pos)]
        print(f"1 worker {a.model}: plain median {statistics.median(plain):.1f} images/s, poseidon median "
              f"{statistics.median(pos):.1f} images/s, ratio of medians "
              f"{statistics.median(pos) / statistics.median(plain):.3f}, median of paired ratios "
              f"{statistics.median(ratios):.3f}")

    if not a.skip_wfbp:
        mpi = mpirun(a.ranks, a.poseidon)
        on, off = [], []
        for r in range(a.repeats):
            x = run(mpi + common)
            y = run(mpi + common + ["--no-wfbp"])
            on.append(x["s_per_iter_median"])
            off.append(y["s_per_iter_median"])
            print(f"{a.ranks} workers, run {r + 1}: WFBP {x['s_per_iter_median']:.3f} s/iter, "
                  f"no WFBP {y['s_per_iter_median']:.3f} s/iter", flush=True)
        print(f"{a.ranks} workers {a.model}: WFBP median {statistics.median(on):.3f} s/iter, no-WFBP median "
              f"{statistics.median(off):.3f} s/iter, speedup {statistics.median(off) / statistics.median(on):.3f}x")


if __name__ == "__main__":
    main()
