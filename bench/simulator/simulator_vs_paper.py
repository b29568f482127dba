#!/usr/bin/env python3
"""ATC'17's scaling figures against `poseidon simulate`, side by side, and a sweep to 256
nodes: where BestScheme turns VGG19-22K's SFB layers back to PS, and each system's
speedup curve (PNG). Nothing here is fitted: the simulator's one calibrated number is the
device rate (VGG19 at 35.5 images/s on one node); see docs/SIMULATOR.md.

    python3 bench/simulator/simulator_vs_paper.py [--poseidon build/apps/poseidon] [--out out/simulate]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, ROOT  # noqa: E402
from benchlib.lab import run_json  # noqa: E402
from benchlib.report import pyplot  # noqa: E402

SYSTEMS = ["poseidon", "wfbp", "ps", "coarse"]
SWEEP = [1, 2, 4, 8, 16, 32, 64, 128, 256]

# (what, model, nodes, bandwidth, system, paper's figure, kind): the paper's numbers as
# docs/design.md lists them. kind "speedup" is x over one node, "images" images/s.
PAPER = [
    ("one node, VGG19 (the calibration)", "vgg19", 1, "40gbit", "poseidon", 35.5, "images"),
    ("one node, GoogLeNet (a check)", "googlenet", 1, "40gbit", "poseidon", 257.0, "images"),
    ("VGG19-22K, 32 nodes, 40 GbE, Poseidon", "vgg19-22k", 32, "40gbit", "poseidon", 29.5, "speedup"),
    ("VGG19-22K, 32 nodes, 40 GbE, WFBP only", "vgg19-22k", 32, "40gbit", "wfbp", 21.5, "speedup"),
    ("VGG19-22K, 32 nodes, 40 GbE, coarse (TF)", "vgg19-22k", 32, "40gbit", "coarse", None, "speedup"),
    ("VGG19-22K, 16 nodes, 10 GbE, Poseidon", "vgg19-22k", 16, "10gbit", "poseidon", 15.5, "speedup"),
    ("VGG19-22K, 16 nodes, 10 GbE, naive PS", "vgg19-22k", 16, "10gbit", "ps", 8.0, "speedup"),
    ("VGG19-22K, 16 nodes, 10 GbE, coarse (TF)", "vgg19-22k", 16, "10gbit", "coarse", None, "speedup"),
    ("Inception-V3, 32 nodes, 40 GbE, Poseidon", "inception-v3", 32, "40gbit", "poseidon", 31.5, "speedup"),
    ("Inception-V3, 32 nodes, 40 GbE, coarse (TF)", "inception-v3", 32, "40gbit", "coarse", 20.0, "speedup"),
]


def simulate(poseidon, *args):
    return run_json([poseidon, "simulate", "--json", *args], timeout=600)


def paper_table(poseidon):
    print("ATC'17 vs `poseidon simulate` (speedup over one node of the same system; "
          "--reconstruct device, --cost-model bytes, defaults otherwise)")
    print(f"{'case':46} {'paper':>8} {'simulated':>10} {'error':>8}")
    rows = []
    for what, model, nodes, bw, system, paper, kind in PAPER:
        run = simulate(poseidon, "--model", model, "--nodes", str(nodes), "--bandwidth", bw,
                       "--system", system)["runs"][0]
        got = run["images_per_s"] if kind == "images" else run["speedup"]
        unit = "" if kind == "images" else "x"
        err = f"{100 * (got - paper) / paper:+.0f}%" if paper else "-"
        shown = f"{paper:.1f}{unit}" if paper else ("fails" if system == "coarse" else "-")
        print(f"{what:46} {shown:>8} {got:>9.1f}{unit} {err:>8}")
        rows.append(dict(case=what, paper=paper, simulated=got, kind=kind))
    return rows


def sweep(poseidon, bandwidth):
    """Speedups of every system, and Poseidon's SFB layers under both rules, for VGG19-22K."""
    nodes = ",".join(map(str, SWEEP))
    runs = simulate(poseidon, "--model", "vgg19-22k", "--sweep", nodes, "--bandwidth", bandwidth,
                    "--system", "all")["runs"]
    timed = simulate(poseidon, "--model", "vgg19-22k", "--sweep", nodes, "--bandwidth", bandwidth,
                     "--system", "poseidon", "--cost-model", "time")["runs"]
    speedup = {s: [r["speedup"] for r in runs if r["system"] == s] for s in SYSTEMS}
    speedup["poseidon (time rule)"] = [r["speedup"] for r in timed]
    sfb = {"bytes": [r["sfb_layers"] for r in runs if r["system"] == "poseidon"],
           "time": [r["sfb_layers"] for r in timed]}
    fc = {"bytes": [[l["scheme"] for l in r["layers"][-3:]] for r in runs if r["system"] == "poseidon"]}
    print(f"\nVGG19-22K on {bandwidth}: speedup over one node, and Poseidon's schemes for fc6, fc7, fc8")
    print(f"{'nodes':>6} " + " ".join(f"{s:>10}" for s in speedup) + "   fc6-fc8 (bytes rule)  SFB layers (time rule)")
    for i, n in enumerate(SWEEP):
        print(f"{n:>6} " + " ".join(f"{speedup[s][i]:>9.1f}x" for s in speedup) +
              f"   {'/'.join(fc['bytes'][i]):21} {sfb['time'][i]}")
    return speedup, sfb


def plot(speedup, sfb, bandwidth, path):
    plt = pyplot()
    if plt is None:
        return
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, values in speedup.items():
        ax.plot(SWEEP, values, marker="o", label=name)
    ax.plot(SWEEP, SWEEP, color="grey", linestyle=":", label="linear")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("nodes")
    ax.set_ylabel("speedup over one node")
    ax.set_title(f"VGG19-22K, {bandwidth} (simulated)")
    ax.legend(fontsize=8)
    bx.step(SWEEP, sfb["bytes"], where="mid", marker="o", label="bytes rule (ATC'17)")
    bx.step(SWEEP, sfb["time"], where="mid", marker="s", label="time rule (+ reconstruction)")
    bx.set_xscale("log", base=2)
    bx.set_xlabel("nodes")
    bx.set_ylabel("FC layers on SFB (of 3)")
    bx.set_title("BestScheme: SFB back to PS as P1 grows")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    ap = arguments(__doc__)
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "simulate"), help="folder for JSON and PNG")
    ap.add_argument("--bandwidth", default="40gbit", help="link rate of the sweep")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    simulate(args.poseidon, "--model", "vgg19-22k", "--nodes", "256", "--bandwidth", args.bandwidth,
             "--system", "poseidon")
    print(f"one 256-node VGG19-22K simulation (poseidon, {args.bandwidth}): {time.monotonic() - start:.1f} s "
          f"wall, the process included (target: under 10 s)")
    rows = paper_table(args.poseidon)
    speedup, sfb = sweep(args.poseidon, args.bandwidth)
    with open(os.path.join(args.out, "simulate_paper.json"), "w") as f:
        json.dump(dict(paper=rows, sweep=dict(nodes=SWEEP, speedup=speedup, sfb_layers=sfb)), f, indent=1)
    plot(speedup, sfb, args.bandwidth, os.path.join(args.out, "vgg19_22k_sweep.png"))


if __name__ == "__main__":
    main()
