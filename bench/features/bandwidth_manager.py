#!/usr/bin/env python3
"""Issue 13's benchmark of the bandwidth manager, in the lab (needs root). Two parts:

budget  `--max-bandwidth` on a faster link: each rank's sending rate during training,
        measured at its NIC (the kernel's counters, the lab prints them): the bytes of a
        long run minus those of a short one (set-up cancels) over the long run's extra
        training time (JSON s_per_iter_mean). The parameter digest must equal a run
        without the budget. fcnet, `poseidon train`, every rank its own node.
order   priority vs FIFO (`--send-order`), alternated in each round with the compute
        ceiling (as many plain processes as ranks, no communication): images/s, medians
        of --repeats rounds, and each order against the bound max(compute-only time,
        bytes sent per rank per iteration / link rate), and against a host CPU bound:
        the ceiling's time plus the ranks' bytes over the bytes Poseidon's communication
        moves per host CPU second (measured first, benchlib.host.comm_cpu_rate) and the host's
        cores; with at least as many ranks as cores the ceiling keeps every core busy, so
        communication's CPU can only add to it;
        also the share of the host's cores busy in the priority runs (/proc/stat). fcnet
        and convnet through the CLI; torchvision models (alexnet, vgg19, resnet50, googlenet) through
        bench/jobs/torchvision_train.py and the Python package.

  sudo bench/features/bandwidth_manager.py budget --budget 200mbit --link 1gbit
  sudo bench/features/bandwidth_manager.py order --models fcnet,alexnet --link 1gbit --repeats 3
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, machine, made_by, use_build_python  # noqa: E402
from benchlib.host import busy_seconds, comm_cpu_rate  # noqa: E402
from benchlib.jobs import CLI_MODELS, bytes_per_s, synthetic_train, torchvision_train  # noqa: E402
from benchlib.lab import compute_ceiling, run_lab_nic  # noqa: E402
from benchlib.report import table_head  # noqa: E402
from benchlib.rounds import alternated, median, ratios  # noqa: E402


def lab_run(a, job):
    """The job on a.ranks ranks, each behind an a.link link: its report and each NIC's bytes."""
    return run_lab_nic(a.poseidon, a.ranks, a.link, job)


def budget(a):
    extra = ["--scheme", a.scheme, "--max-bandwidth", a.budget]
    short, nic_short = lab_run(a, synthetic_train("poseidon", "fcnet", a.short, extra))
    long_, nic_long = lab_run(a, synthetic_train("poseidon", "fcnet", a.long, extra))
    free, _ = lab_run(a, synthetic_train("poseidon", "fcnet", a.long, ["--scheme", a.scheme]))
    seconds = long_["s_per_iter_mean"] * a.long - short["s_per_iter_mean"] * a.short
    limit = bytes_per_s(a.budget)
    print(f"# budget {a.budget} on a {a.link} link, {a.ranks} ranks, fcnet --scheme {a.scheme}; {machine()}")
    print(made_by())
    worst = 0.0
    for r, (b0, b1) in enumerate(zip(nic_short, nic_long)):
        rate = (b1 - b0) / seconds
        worst = max(worst, rate)
        print(f"rank {r}: {(b1 - b0) / 1e6:.1f} MB at the NIC in {seconds:.2f} s of training: "
              f"{rate * 8 / 1e6:.1f} mbit/s ({rate / limit:.3f} of the budget)")
    print(f"without the budget: {free['s_per_iter_mean']:.3f} s/iter; with it: {long_['s_per_iter_mean']:.3f} s/iter")
    same = long_["param_digest"] == free["param_digest"]
    print(f"digest with the budget {long_['param_digest']}, without {free['param_digest']}: "
          f"{'equal' if same else 'DIFFERENT'}")
    print(f"queue: {long_['send_queue']}")
    print(f"highest rank rate {worst * 8 / 1e6:.1f} mbit/s against the budget's {limit * 8 / 1e6:.0f} "
          f"(target <= {1.05 * limit * 8 / 1e6:.0f}): {'met' if worst <= 1.05 * limit and same else 'MISSED'}")


def order_run(a, model, system):
    """images/s, bytes sent per rank per iteration and the share of the host's cores busy
    over the whole run, of one system ('priority', 'fifo', 'compute')."""
    start, wall = busy_seconds(), time.perf_counter()
    ips, sent = order_job(a, model, system)
    return ips, sent, (busy_seconds() - start) / ((time.perf_counter() - wall) * (os.cpu_count() or 1))


def order_job(a, model, system):
    if model in CLI_MODELS:
        if system == "compute":
            # The ceiling: every rank a plain process at once, no communication.
            runs = compute_ceiling(synthetic_train(a.poseidon, model, a.iterations, ["--baseline"]), a.ranks)
            return a.ranks * 32 / max(j["s_per_iter_median"] for j in runs), 0.0
        flags = ["--scheme", a.scheme, "--send-order", system]
        j, _ = lab_run(a, synthetic_train("poseidon", model, a.iterations, flags))
        return j["images_per_s"], j["bytes_sent_per_iter"]
    step_system = {"priority": "poseidon", "fifo": "poseidon-fifo", "compute": "compute"}[system]
    j, _ = lab_run(a, torchvision_train(step_system, model, a.iterations, ["--scheme", a.scheme]))
    return j["images_per_s"], j.get("bytes_sent_per_iter", 0.0)


def order(a):
    use_build_python()
    link = bytes_per_s(a.link)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        comm_cpu = comm_cpu_rate(a.poseidon, tmp)
    print(f"# priority vs FIFO, {a.ranks} ranks, {a.link} per rank, scheme {a.scheme}, {a.repeats} rounds; {machine()}")
    print(made_by())
    print(f"communication costs the host one CPU second per {comm_cpu / 1e9:.2f} GB sent; {cores} cores")
    print(table_head("model", "priority images/s", "fifo images/s", "priority / fifo (paired)", "compute images/s",
                     "bound", "priority of bound", "fifo of bound", "host CPU bound", "priority of host CPU bound",
                     "host busy (priority)"))
    for model in a.models.split(","):
        def run(system, r):
            ips, sent, busy = order_run(a, model, system)
            print(f"{model} round {r + 1} {system:8s} {ips:.2f} images/s", file=sys.stderr, flush=True)
            return ips, sent, busy

        runs = alternated(a.repeats, ["priority", "fifo", "compute"], run)
        seen = {system: [ips for ips, _, _ in v] for system, v in runs.items()}
        sent = [b for system in ("priority", "fifo") for _, b, _ in runs[system]]
        busy = [share for _, _, share in runs["priority"]]
        pri, fifo, comp = (median(seen[s]) for s in ("priority", "fifo", "compute"))
        paired = median(ratios(seen["priority"], seen["fifo"]))
        compute_s = a.ranks * 32 / comp
        bound = a.ranks * 32 / max(compute_s, median(sent) / link)
        host = a.ranks * 32 / max(compute_s + a.ranks * median(sent) / (comm_cpu * cores), median(sent) / link)
        print(f"| {model} | {pri:.2f} | {fifo:.2f} | {paired:.3f} | {comp:.2f} | {bound:.2f} | {pri / bound:.2f} | "
              f"{fifo / bound:.2f} | {host:.2f} | {pri / host:.2f} | {100 * median(busy):.0f}% |", flush=True)


def main():
    ap = arguments(__doc__)
    ap.add_argument("part", choices=("budget", "order"))
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--scheme", default="auto")
    ap.add_argument("--budget", default="200mbit")
    ap.add_argument("--short", type=int, default=3, help="budget: iterations of the short run")
    ap.add_argument("--long", type=int, default=13, help="budget: iterations of the long run")
    ap.add_argument("--models", default="fcnet,alexnet")
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    budget(a) if a.part == "budget" else order(a)


if __name__ == "__main__":
    main()
