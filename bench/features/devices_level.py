#!/usr/bin/env python3
"""Issue 13's benchmark of the devices level, in the lab (needs root): N nodes of D ranks,
each node behind one link (`poseidon lab --nodes N --ranks-per-node D`), hierarchical
(`--devices-per-node host`: a node's ranks aggregate, its leader alone sends) against flat
(`--devices-per-node 1`: every rank sends on its own over the shared link), alternated in
each round. Per system: images/s (median of --repeats rounds, and the paired ratio), and
the bytes each node's NIC sent per iteration (a long run minus a short one, so set-up
cancels) against the cost model's node figure (model_bytes_of).

  sudo bench/features/devices_level.py --models fcnet --nodes 2 --ranks-per-node 2 --link 1gbit --repeats 3
  sudo bench/features/devices_level.py --models vgg19,resnet50 --repeats 3

Models other than the CLI's run as torchvision models through the Python package
(bench/jobs/torchvision_train.py, batch 32 per rank, image size as in the other lab benchmarks);
their NIC bytes are shown beside the PS figure (2 (N-1)/N x 4 bytes per parameter for a
node; for a flat node, the part of its D ranks' figure that leaves the node) rather than
the plan's.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, machine, made_by, use_build_python  # noqa: E402
from benchlib.jobs import CLI_MODELS, synthetic_train, torchvision_train  # noqa: E402
from benchlib.lab import run_lab_nic  # noqa: E402
from benchlib.report import table_head  # noqa: E402
from benchlib.rounds import alternated, median, ratios  # noqa: E402


def lab_run(a, job):
    """The job on a.nodes nodes of a.ranks_per_node ranks, each node behind an a.link link:
    its report and the bytes each node's NIC sent."""
    return run_lab_nic(a.poseidon, a.nodes * a.ranks_per_node, a.link, job, nodes=a.nodes)


def job(model, scheme, iterations, nodes):
    flags = ["--scheme", scheme, "--devices-per-node", nodes]
    if model not in CLI_MODELS:
        return torchvision_train("poseidon", model, iterations, flags)
    return synthetic_train("poseidon", model, iterations, flags)


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
    p = arguments(__doc__)
    p.add_argument("--models", default="fcnet", help="comma-separated: CLI models (fcnet, convnet) or torchvision ones (vgg19, resnet50)")
    p.add_argument("--scheme", default="ps", help="ps, sfb or auto")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--link", default="1gbit")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--short", type=int, default=3)
    p.add_argument("--iterations", type=int, default=8)
    a = p.parse_args()
    use_build_python()  # the Python models import poseidon from the build
    print(f"# devices level vs flat: {a.nodes} nodes x {a.ranks_per_node} ranks, one {a.link} link per node, "
          f"--scheme {a.scheme}, {a.repeats} rounds; {machine()}")
    print(made_by())
    print(table_head("model", "hierarchical images/s", "flat images/s", "hierarchical / flat (paired)",
                     "NIC MB/iter per node, hierarchical", "model", "flat", "model"))
    for model in a.models.split(","):
        nic, model_bytes = {}, {}

        def run(nodes, r):
            """images/s; in the first round also the NIC's bytes per iteration (a short run
            subtracted, so that set-up cancels) and the cost model's."""
            report, sent = lab_run(a, job(model, a.scheme, a.iterations, nodes))
            if r == 0:
                _, short = lab_run(a, job(model, a.scheme, a.short, nodes))
                nic[nodes] = median([(x - y) / (a.iterations - a.short) for x, y in zip(sent, short)])
                model_bytes[nodes] = model_bytes_of(report, a, nodes)
            return report["images_per_s"]

        speed = alternated(a.repeats, ["host", "1"], run, swap=True)
        paired = median(ratios(speed["host"], speed["1"]))
        print(f"| {model} | {median(speed['host']):.2f} | {median(speed['1']):.2f} | {paired:.3f} | "
              f"{nic['host'] / 1e6:.1f} | {model_bytes['host'] / 1e6:.1f} | {nic['1'] / 1e6:.1f} | "
              f"{model_bytes['1'] / 1e6:.1f} |")


if __name__ == "__main__":
    main()
