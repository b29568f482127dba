#!/usr/bin/env python3
"""Issue 13's benchmark of the devices level, in the lab (needs root): N nodes of D ranks,
each node behind one link (`poseidon lab --nodes N --ranks-per-node D`), hierarchical
(`--devices-per-node host`: a node's ranks aggregate, its leader alone sends) against flat
(`--devices-per-node 1`: every rank sends on its own over the shared link), alternated in
each round. Per system: images/s (median of --repeats rounds, and the paired ratio), and
the bytes each node's NIC sent per iteration (a long run minus a short one, so set-up
cancels) against the cost model's node figure (model_bytes_of).

  sudo bench/nodes.py --models fcnet --nodes 2 --ranks-per-node 2 --link 1gbit --repeats 3
  sudo bench/nodes.py --models vgg19,resnet50 --repeats 3

Models other than the CLI's run as torchvision models through the Python package
(bench/torchvision_step.py, batch 32 per rank, image size as in bench/papers_models.py);
their NIC bytes are shown beside the PS figure (2 (N-1)/N x 4 bytes per parameter for a
node; for a flat node, the part of its D ranks' figure that leaves the node) rather than
the plan's.
"""
import argparse
import os
import sys

from bandwidth_manager import lab_run as bandwidth_lab_run
from common import ENV, POSEIDON, ROOT, machine, median
from papers_models import PY, SIZES, STEP

CLI_MODELS = ("fcnet", "convnet", "mlp", "resnet")


def lab_run(a, link, job):
    return bandwidth_lab_run(a, 0, link, job, lab_args=["--nodes", str(a.nodes), "--ranks-per-node",
                                                        str(a.ranks_per_node)])


def job(model, scheme, iterations, nodes):
    if model not in CLI_MODELS:
        return [PY, STEP, "--system", "poseidon", "--model", model, "--image-size", str(SIZES.get(model, 32)),
                "--scheme", scheme, "--iterations", str(iterations), "--devices-per-node", nodes]
    return ["poseidon", "train", "--model", model, "--synthetic", "--no-eval", "--json", "--scheme", scheme,
            "--iterations", str(iterations), "--devices-per-node", nodes]


def model_bytes_of(report, a, nodes):
    """The cost model's bytes a node's NIC sends per iteration: the CLI's plan, or for a
    Python model the PS figure from its parameter count (2 (P-1)/P x 4 bytes per parameter
    for each of P participants). Flat, a node's D ranks each send to R-1 peers evenly, D-1
    of them on the node itself (loopback, off the NIC): D x (R-D)/(R-1) of a rank's figure."""
    ranks = a.nodes * a.ranks_per_node
    if "bytes_model_per_iter" in report:
        per = report["bytes_model_per_iter"]
    else:
        P = a.nodes if nodes == "host" else ranks
        per = 2 * (P - 1) / P * 4 * report["parameters"]
    if nodes == "host":
        return per
    return per * a.ranks_per_node * (ranks - a.ranks_per_node) / (ranks - 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="fcnet", help="comma-separated: CLI models (fcnet, convnet) or torchvision ones (vgg19, resnet50)")
    p.add_argument("--scheme", default="ps", help="ps, sfb or auto")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--link", default="1gbit")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--short", type=int, default=3)
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--poseidon", default=POSEIDON)
    a = p.parse_args()
    ENV["PYTHONPATH"] = os.path.join(ROOT, "build/python")  # the Python models import poseidon from the build
    print(f"# devices level vs flat: {a.nodes} nodes x {a.ranks_per_node} ranks, one {a.link} link per node, "
          f"--scheme {a.scheme}, {a.repeats} rounds; {machine()}")
    print(f"Made by: sudo bench/nodes.py {' '.join(sys.argv[1:])}")
    print("| model | hierarchical images/s | flat images/s | hierarchical / flat (paired) | "
          "NIC MB/iter per node, hierarchical | model | flat | model |")
    print("|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        speed = {"host": [], "1": []}
        nic = {}
        model_bytes = {}
        for r in range(a.repeats):
            for nodes in (("host", "1") if r % 2 == 0 else ("1", "host")):
                report, sent = lab_run(a, a.link, job(model, a.scheme, a.iterations, nodes))
                speed[nodes].append(report["images_per_s"])
                if r == 0:
                    _, short = lab_run(a, a.link, job(model, a.scheme, a.short, nodes))
                    nic[nodes] = median([(x - y) / (a.iterations - a.short) for x, y in zip(sent, short)])
                    model_bytes[nodes] = model_bytes_of(report, a, nodes)
        paired = median([h / f for h, f in zip(speed["host"], speed["1"])])
        print(f"| {model} | {median(speed['host']):.2f} | {median(speed['1']):.2f} | {paired:.3f} | "
              f"{nic['host'] / 1e6:.1f} | {model_bytes['host'] / 1e6:.1f} | {nic['1'] / 1e6:.1f} | "
              f"{model_bytes['1'] / 1e6:.1f} |")


if __name__ == "__main__":
    main()
