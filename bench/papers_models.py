#!/usr/bin/env python3
"""Issue 12's benchmark: the papers' models from torchvision on 4 ranks in the bandwidth lab,
side by side in each round: PyTorch DDP, DDP + fp16 hook, DDP + PowerSGD (rank 4), Poseidon
(scheme auto, server-side SGD) and the compute ceiling (4 plain processes, no
communication). Batch 32 per rank, synthetic data; the FC layers keep the papers' shapes
(torchvision pools to 6x6 / 7x7 before them whatever the input size). Needs root.

Per model and bandwidth: medians of --repeats rounds, each system's images/s, Poseidon over
DDP and over the best DDP variant, and Poseidon against its bound: the throughput of an
iteration that takes the larger of the compute-only time and Poseidon's bytes sent per
iteration (per rank, measured) over the link rate.
  sudo bench/papers_models.py --models alexnet,vgg19,resnet50,googlenet --bandwidths 1gbit,10gbit
"""
import argparse
import os

from common import ENV, POSEIDON, ROOT, median, run_json

PY = "/usr/bin/python3"
STEP = os.path.join(ROOT, "bench/torchvision_step.py")
SYSTEMS = ("ddp", "ddp-fp16", "ddp-powersgd", "poseidon", "compute")
SIZES = {"alexnet": 63, "vgg19": 32, "resnet50": 32, "googlenet": 32, "inception_v3": 75, "resnet152": 32}
RATES = {"1gbit": 1e9 / 8, "10gbit": 1e10 / 8}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="alexnet,vgg19,resnet50,googlenet")
    ap.add_argument("--bandwidths", default="1gbit,10gbit")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--poseidon", default=POSEIDON)
    a = ap.parse_args()
    ENV["PYTHONPATH"] = os.path.join(ROOT, "build/python")
    systems = a.systems.split(",")
    for model in a.models.split(","):
        for bw in a.bandwidths.split(","):
            seen = {s: [] for s in systems}
            sent = []
            for r in range(a.repeats):
                for i, system in enumerate(systems):
                    cmd = [a.poseidon, "lab", "--ranks", str(a.ranks), "--bandwidth", bw, "--", PY, STEP,
                           "--system", system, "--model", model, "--image-size", str(SIZES.get(model, 32)),
                           "--iterations", str(a.iterations), "--port", str(29600 + 10 * r + i)]
                    j = run_json(cmd, timeout=3600)
                    seen[system].append(j["images_per_s"])
                    if system == "poseidon":
                        sent.append(j["bytes_sent_per_iter"])
                    print(f"{model} {bw} round {r + 1} {system:13s} {j['images_per_s']:.2f} images/s", flush=True)
            med = {s: median(v) for s, v in seen.items()}
            line = f"| {model} | {bw} | " + " | ".join(f"{med[s]:.2f}" for s in systems)
            if "poseidon" in med and "ddp" in med:
                variants = [med[s] for s in ("ddp", "ddp-fp16", "ddp-powersgd") if s in med]
                line += f" | {med['poseidon'] / med['ddp']:.2f}x | {med['poseidon'] / max(variants):.2f}x"
            if "compute" in med and sent:
                compute_s = a.ranks * 32 / med["compute"]
                bound = a.ranks * 32 / max(compute_s, median(sent) / RATES[bw])
                line += f" | {bound:.2f} | {med['poseidon'] / bound:.0%}"
            print("| model | link | " + " | ".join(systems) + " | vs DDP | vs best DDP | bound | of bound |")
            print(line + " |", flush=True)


if __name__ == "__main__":
    main()
