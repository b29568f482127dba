#!/usr/bin/env python3
"""The benchmark suite against PyTorch DDP (issue "Bandwidth lab, timeline, and a benchmark
suite"): for a model, rank counts and link rates it runs side by side, in one go,
  plain      a plain LibTorch loop in one process (`poseidon train --baseline`),
  naive-ps   Poseidon, parameter server, no wait-free backprop (--scheme ps --no-wfbp),
  ps+wfbp    Poseidon, parameter server with WFBP (--scheme ps),
  poseidon   full Poseidon (--scheme auto --cost-model time: PS or SFB per layer, rates
             measured in the lab at start-up),
  ddp        PyTorch DDP with gloo (bench/jobs/ddp_model_file.py, the project's torch),
  compute    the compute ceiling: N plain processes (`--baseline`) at once, no communication;
             its s/iter is the slowest process's (a synchronous job goes at that pace),
every multi-rank run inside `poseidon lab` at the given rate per rank, same model file,
batch, one compute thread per rank, synthetic data. Systems alternate within a repeat so
drift hits them alike; medians of --repeats. Writes suite-<model>.md, .csv and .png into
--out, with the machine and settings. Needs root (the lab). Usage:
  sudo bench/papers/systems_vs_ddp.py [--model fcnet] [--ranks 4] [--bandwidths 1gbit,10gbit]
      [--iterations 12] [--repeats 2]
"""
import datetime
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import (arguments, ENV, PYTHON, ROOT, command_line, machine, malloc_like_poseidon,  # noqa: E402
                          require_root, script)
from benchlib.jobs import model_file as model_file_of  # noqa: E402
from benchlib.lab import compute_ceiling, run_json, run_ranks  # noqa: E402
from benchlib.report import pyplot, write_csv  # noqa: E402
from benchlib.rounds import alternated, median, ratios  # noqa: E402


def check_like_for_like(ddp):
    """Stops unless DDP's ranks ran with the malloc settings and OpenBLAS kernels Poseidon had."""
    if ddp.get("malloc_mmap_threshold") != ENV["MALLOC_MMAP_THRESHOLD_"]:
        sys.exit("DDP's ranks did not get the malloc settings: not a like-for-like comparison")
    if "OPENBLAS_CORETYPE" in ENV and ddp.get("blas", "") != ENV["OPENBLAS_CORETYPE"]:
        sys.exit(f"DDP ran with OpenBLAS {ddp.get('blas')} kernels, Poseidon with "
                 f"{ENV['OPENBLAS_CORETYPE']}: not a like-for-like comparison")


def main():
    ap = arguments(__doc__)
    ap.add_argument("--model", default="fcnet")
    ap.add_argument("--ranks", default="4")
    ap.add_argument("--bandwidths", default="1gbit,10gbit")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--single-repeats", type=int, default=6, help="pairs of one-process runs (plain, poseidon)")
    ap.add_argument("--systems", default="naive-ps,ps+wfbp,poseidon,ddp,compute")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/benchmarks"))
    a = ap.parse_args()
    if a.single_repeats < 1:
        ap.error("--single-repeats: at least 1 (the one-process pair is the speedup's baseline)")
    require_root()
    model_file = model_file_of(a.model)
    common = ["--model-file", model_file, "--synthetic", "--batch", str(a.batch), "--iterations",
              str(a.iterations), "--no-eval", "--json", "--threads", "1"]
    poseidon_flags = {
        "naive-ps": ["--scheme", "ps", "--no-wfbp"],
        "ps+wfbp": ["--scheme", "ps"],
        "poseidon": ["--scheme", "auto", "--cost-model", "time"],
    }
    malloc_like_poseidon()  # DDP allocates as Poseidon does
    systems = a.systems.split(",")
    rows = []
    pairs = []  # per-repeat ratios against DDP, for the record

    def record(system, ranks, bandwidth, times, extra=""):
        s = median(times)
        rows.append({"model": a.model, "system": system, "ranks": ranks, "bandwidth": bandwidth,
                     "s_per_iter": s, "images_per_s": ranks * a.batch / s, "runs": len(times), "note": extra})
        print(f"{a.model} {system:9s} {ranks} ranks {bandwidth:8s} {s:.3f} s/iter "
              f"{ranks * a.batch / s:7.1f} images/s {extra}", flush=True)

    # One process, no network: the reference every speedup is measured against. Cheap runs
    # whose timings drift by 10-20% from minute to minute here, so more of them, in ABBA
    # order (plain, poseidon, poseidon, plain, ...) so that drift hits both alike.
    def single(system, rep):
        if system == "poseidon":
            return run_json([a.poseidon, "train"] + common + ["--scheme", "ps"])["s_per_iter_median"]
        j = run_json([a.poseidon, "train", "--baseline"] + common)
        # Poseidon picks OpenBLAS kernels that match the CPU when the library's own
        # detection falls back to generic ones (apps/poseidon/blas_kernels.h); every
        # system gets the same.
        if j.get("blas") and "OPENBLAS_CORETYPE" not in ENV:
            ENV["OPENBLAS_CORETYPE"] = j["blas"]
        return j["s_per_iter_median"]

    singles = alternated(a.single_repeats, ["plain", "poseidon"], single, swap=True)
    plain, one = singles["plain"], singles["poseidon"]
    paired = median(ratios(plain, one))
    print(f"1 rank: poseidon / plain images/s, median of {len(one)} paired ratios: {paired:.2f}x", flush=True)
    record("plain", 1, "-", plain)
    record("poseidon", 1, "-", one, f"median of paired ratios {paired:.2f}x")

    for bandwidth in a.bandwidths.split(","):
        for ranks in [int(r) for r in a.ranks.split(",")]:
            times = {s: [] for s in systems}
            plans = {}
            for rep in range(a.repeats):
                for system in systems:
                    if system == "compute":
                        reports = compute_ceiling([a.poseidon, "train", "--baseline"] + common, ranks)
                        j = {"s_per_iter_median": max(r["s_per_iter_median"] for r in reports)}
                    elif system == "ddp":
                        port = str(random.randint(20000, 60000))
                        j = run_ranks(a.poseidon, ranks, bandwidth, [
                            PYTHON, script("jobs/ddp_model_file.py"), "--model-file", model_file, "--batch",
                            str(a.batch), "--iterations", str(a.iterations), "--port", port])
                        check_like_for_like(j)
                    else:
                        job = ["poseidon", "train"] + common + poseidon_flags[system]
                        j = run_ranks(a.poseidon, ranks, bandwidth, job)
                        plans[system] = ",".join(l["scheme"] for l in j["layers"])
                    times[system].append(j["s_per_iter_median"])
                    print(f"  run {rep + 1} {system:9s} {ranks} ranks {bandwidth}: {j['s_per_iter_median']:.3f} s/iter",
                          flush=True)
            for system in systems:
                record(system, ranks, bandwidth, times[system], plans.get(system, ""))
            if "compute" in systems:
                for system in (s for s in systems if s != "compute"):
                    shares = ratios(times["compute"], times[system])
                    pairs.append(f"{system}, {ranks} ranks, {bandwidth}: share of the compute ceiling in the same "
                                 f"repeat: " + ", ".join(f"{r:.2f}" for r in shares)
                                 + f" (median {median(shares):.2f})")
                    print("  " + pairs[-1], flush=True)
            if "ddp" in systems:
                for system in (s for s in systems if s not in ("ddp", "compute")):
                    over = ratios(times["ddp"], times[system])
                    pairs.append(f"{system}, {ranks} ranks, {bandwidth}: images/s over DDP's in the same repeat: "
                                 + ", ".join(f"{r:.2f}" for r in over) + f" (median {median(over):.2f}x)")
                    print("  " + pairs[-1], flush=True)

    base = next(r for r in rows if r["system"] == "plain")["images_per_s"]
    for r in rows:
        r["speedup_vs_plain"] = r["images_per_s"] / base
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"suite-{a.model}")
    write_csv(stem + ".csv", rows, list(rows[0].keys()))
    host = machine()
    with open(stem + ".md", "w") as f:
        f.write(f"# Suite: {a.model}\n\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {host}; "
                f"batch {a.batch} per rank, {a.iterations} iterations per run, one compute thread per rank, synthetic "
                f"data, medians of {a.repeats} runs; links capped per rank by `poseidon lab` (tc); OpenBLAS "
                f"kernels: {ENV.get('OPENBLAS_CORETYPE', 'as detected')} and glibc malloc thresholds "
                f"{ENV['MALLOC_MMAP_THRESHOLD_']}/{ENV['MALLOC_TRIM_THRESHOLD_']} (mmap/trim) for every system. "
                f"`compute`: as many plain processes as ranks at once, no communication (the ceiling), "
                f"measured in the same rounds.\n\nMade by: `{command_line()}`\n\n")
        f.write("| system | ranks | link per rank | s/iter | images/s | speedup vs plain | vs ddp | schemes |\n")
        f.write("|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            ddp = next((d for d in rows if d["system"] == "ddp" and d["ranks"] == r["ranks"]
                        and d["bandwidth"] == r["bandwidth"]), None)
            vs = f"{r['images_per_s'] / ddp['images_per_s']:.2f}x" if ddp else "-"
            f.write(f"| {r['system']} | {r['ranks']} | {r['bandwidth']} | {r['s_per_iter']:.3f} | "
                    f"{r['images_per_s']:.1f} | {r['speedup_vs_plain']:.2f}x | {vs} | {r['note']} |\n")
        if pairs:
            f.write("\nPaired ratios (each repeat runs the systems back to back):\n\n")
            for line in pairs:
                f.write(f"- {line}\n")
    plt = pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for (system, bandwidth) in sorted({(r["system"], r["bandwidth"]) for r in rows if r["ranks"] > 1}):
            pts = sorted((r["ranks"], r["images_per_s"], r["speedup_vs_plain"]) for r in rows
                         if r["system"] == system and r["bandwidth"] == bandwidth)
            pts = [(1, base, 1.0)] + pts
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{system} @ {bandwidth}")
            axes[1].plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=f"{system} @ {bandwidth}")
        axes[0].set_xlabel("ranks"), axes[0].set_ylabel("images/s (all ranks)")
        axes[1].set_xlabel("ranks"), axes[1].set_ylabel("speedup vs one plain process")
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{a.model}, batch {a.batch} per rank, {host}", fontsize=8)
        fig.tight_layout()
        fig.savefig(stem + ".png", dpi=110)
    print(f"wrote {stem}.md, .csv and .png")


if __name__ == "__main__":
    main()
