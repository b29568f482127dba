#!/usr/bin/env python3
"""Issue 14's validation of `poseidon simulate` against real runs on this machine (needs
root for the lab). For each case: a real lab job (`poseidon lab --ranks N --bandwidth B --
poseidon train ... --profile-out P` for the CLI's models; for torchvision's, the Python
package through bench/jobs/torchvision_train.py, whose DistributedModel.write_profile writes P),
then the simulator on that job's own profile (rank 0's per-layer medians and the layers'
shapes) for the same N nodes, link and system; measured vs predicted images/s.

Systems: poseidon (`--scheme auto`, WFBP), wfbp (`--scheme ps`, WFBP), ps (`--scheme ps
--no-wfbp`: every sync after the whole backward). What the simulator is told, and nothing
else (no fitting to the measured images/s):
  - the profile of the same run (its compute times include the other ranks sharing the
    cores, as they were measured under them);
  - the link: the lab's tc rate in each direction, times 1448/1514, the share of a full TCP
    segment that is payload (Ethernet 14 + IP 20 + TCP 32 header bytes), or less where the
    host's network stack cannot keep up: its rate is measured once (bench/jobs/stack_rate.py in
    a 2-rank lab on a 100 gbit link) and shared out over the ranks (link_rate below);
  - the CPU rates of a server's sum/step (--reduce-rate) and of SFB's reconstruction GEMM
    (--gemm-rate): measured once before the grid (calibrate below: numpy, one thread),
    times cores/ranks when ranks outnumber cores (the cores are shared the same way the
    profile's compute was).
  - the host's cores (--host-cores, all the ranks on them: --nodes-per-host) and the bytes
    Poseidon's communication moves per host CPU second (--stack-rate), measured once
    before the grid (benchlib.host.comm_cpu_rate): the simulator's host CPU bound, the busiest
    host's compute-thread CPU (each profile's `cpu iteration_ms`) plus its communication
    CPU, over its cores.
Each case runs --repeats times; the table shows the median measured and the median of the
predictions from each run's profile.

  sudo bench/simulator/simulator_vs_lab.py                       # the default grid, 3 runs per case (~30 min)
  sudo bench/simulator/simulator_vs_lab.py --models fcnet --ranks 2,4 --bandwidths 1gbit --systems poseidon
"""
import os
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS: one thread, as each rank runs
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, PYTHON, machine, made_by, script, use_build_python  # noqa: E402
from benchlib.host import comm_cpu_rate  # noqa: E402
from benchlib.jobs import CLI_MODELS, bytes_per_s, synthetic_train, torchvision_train  # noqa: E402
from benchlib.lab import run_json, run_ranks  # noqa: E402
from benchlib.report import table_head  # noqa: E402
from benchlib.rounds import median  # noqa: E402

SYSTEMS = {"poseidon": ["--scheme", "auto"], "wfbp": ["--scheme", "ps"], "ps": ["--scheme", "ps", "--no-wfbp"]}
PAYLOAD_SHARE = 1448 / 1514


def calibrate():
    """One thread's sum rate (bytes/s of a += b over 8 MB arrays) and GEMM rate (FLOP/s of
    a 256 x 2048 by 2048 x 2048 float product, fcnet's shapes), medians of 5."""
    a = np.ones(2 << 20, dtype=np.float32)
    b = np.ones(2 << 20, dtype=np.float32)
    sums = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(20):
            a += b
        sums.append(20 * a.nbytes / (time.perf_counter() - t))
    x = np.ones((256, 2048), dtype=np.float32)
    w = np.ones((2048, 2048), dtype=np.float32)
    gemms = []
    for _ in range(5):
        t = time.perf_counter()
        x @ w
        gemms.append(2 * 256 * 2048 * 2048 / (time.perf_counter() - t))
    return median(sums), median(gemms)


def stack_rate(a):
    """Bytes/s the host's network stack moves from one lab rank to another when nothing else
    runs (bench/jobs/stack_rate.py on a 100 gbit lab link: the CPU sets the rate, not tc); median of 3."""
    job = [PYTHON, script("jobs/stack_rate.py"), "1024"]
    return median([run_ranks(a.poseidon, 2, "100gbit", job)["stack_bytes_per_s"] for _ in range(3)])


def measure(a, model, ranks, link, system, profile):
    """A lab job: the CLI's models through `poseidon train`, torchvision's through the Python
    package (bench/jobs/torchvision_train.py, batch 32 per rank)."""
    flags = ["--profile-out", profile] + SYSTEMS[system]
    if model in CLI_MODELS:
        job = synthetic_train(a.poseidon, model, a.iterations, flags)
    else:
        job = torchvision_train("poseidon", model, a.iterations, flags)
    return run_ranks(a.poseidon, ranks, link, job)


def link_rate(link, ranks, stack):
    """Payload bytes/s a rank moves each way: the tc rate's payload share, or what its share
    of the host's stack allows. The stack moved `stack` with one core sending and one
    receiving; with every rank sending and receiving at once, the C cores give each of the
    P ranks stack x C / (2 P) each way."""
    return min(bytes_per_s(link) * PAYLOAD_SHARE, stack * (os.cpu_count() or 1) / (2 * ranks))


def predict(a, model, ranks, link, system, profile, rates):
    sum_rate, gemm_rate, stack, comm_cpu = rates
    share = min(1.0, (os.cpu_count() or 1) / ranks)
    # The profile names its layers' shapes: no --model.
    j = run_json([a.poseidon, "simulate", "--json", "--profile", profile, "--nodes", str(ranks),
             "--bandwidth", f"{link_rate(link, ranks, stack):.0f}B", "--system", system,
             "--reduce-rate", f"{sum_rate * share:.0f}B", "--gemm-rate", f"{gemm_rate * share:.4g}",
             "--host-cores", str(os.cpu_count() or 1), "--nodes-per-host", str(ranks),
             "--stack-rate", f"{comm_cpu:.0f}B"])
    r = j["runs"][0]
    return r["images_per_s"], r["cpu_bound_s"] > r["schedule_s"]


# The default grid: every rank count, link and system of the issue at least once per model.
GRID = [(2, "1gbit", "poseidon"), (3, "2gbit", "poseidon"), (4, "1gbit", "poseidon"), (4, "10gbit", "poseidon"),
        (2, "10gbit", "wfbp"), (4, "2gbit", "wfbp"), (2, "10gbit", "ps"), (4, "1gbit", "ps")]
# Python models run longer: half the grid, still every rank count, link and system.
GRID_PY = [(2, "1gbit", "poseidon"), (4, "10gbit", "poseidon"), (3, "2gbit", "wfbp"), (4, "1gbit", "ps")]


def cases(a):
    for model in a.models.split(","):
        if not (a.ranks or a.bandwidths or a.systems):
            yield from ((model,) + case for case in (GRID if model in CLI_MODELS else GRID_PY))
            continue
        for ranks in map(int, (a.ranks or "2,3,4").split(",")):
            for link in (a.bandwidths or "1gbit,2gbit,10gbit").split(","):
                for system in (a.systems or "poseidon,wfbp,ps").split(","):
                    yield model, ranks, link, system


def main():
    p = arguments(__doc__)
    p.add_argument("--models", default="fcnet,convnet,resnet18,alexnet",
                   help="the CLI's (fcnet, convnet) or torchvision's (resnet18, alexnet, vgg11, ...)")
    p.add_argument("--ranks", help="rank counts, e.g. 2,3,4 (any of these three: their cross product "
                   "instead of the default grid)")
    p.add_argument("--bandwidths", help="lab links, e.g. 1gbit,2gbit,10gbit")
    p.add_argument("--systems", help="poseidon, wfbp, ps")
    p.add_argument("--repeats", type=int, default=3, help="runs per case: medians of measured and of predicted")
    p.add_argument("--iterations", type=int, default=8)
    a = p.parse_args()
    use_build_python()
    sum_rate, gemm_rate = calibrate()
    stack = stack_rate(a)
    with tempfile.TemporaryDirectory() as tmp:
        comm_cpu = comm_cpu_rate(a.poseidon, tmp)
    print(f"# `poseidon simulate` vs the lab; {machine()}")
    print(made_by())
    print(f"calibration (one thread, this host): sum {sum_rate / 1e9:.2f} GB/s, GEMM {gemm_rate / 1e9:.1f} GFLOP/s, "
          f"network stack {stack / 1e9:.2f} GB/s, communication {comm_cpu / 1e9:.2f} GB per host CPU second; links at {PAYLOAD_SHARE:.3f} of the tc rate")
    print(table_head("model", "ranks", "link", "system", "measured images/s (range)", "simulated", "error",
                     "host CPU bound binds"))
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (model, ranks, link, system) in enumerate(cases(a)):
            got, sim, binds = [], [], 0
            for r in range(a.repeats):
                profile = os.path.join(tmp, f"{i}-{r}.prof")
                got.append(measure(a, model, ranks, link, system, profile)["images_per_s"])
                ips, bound = predict(a, model, ranks, link, system, profile, (sum_rate, gemm_rate, stack, comm_cpu))
                sim.append(ips)
                binds += bound
            err = (median(sim) - median(got)) / median(got)
            errors.append(abs(err))
            print(f"| {model} | {ranks} | {link} | {system} | {median(got):.1f} ({min(got):.1f}-{max(got):.1f}) | "
                  f"{median(sim):.1f} | {100 * err:+.1f}% | {binds}/{a.repeats} |", flush=True)
    print(f"median absolute error {100 * median(errors):.1f}% (target <= 10%), worst {100 * max(errors):.1f}% "
          f"(target <= 20%) over {len(errors)} cases")


if __name__ == "__main__":
    main()
