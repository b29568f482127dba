"""Helpers shared by the benchmark scripts: run `poseidon` with the thread settings of the
DESIGN.md measurements (one compute thread per rank) and read its JSON summary."""
import csv
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POSEIDON = os.path.join(ROOT, "build/apps/poseidon")  # the default binary of every script
# The Python the jobs run in: POSEIDON_PYTHON (the build's, as scripts/setup.sh took it), else
# the project's .venv (torch 2.11, the build's torch) when there.
PYTHON = os.environ.get("POSEIDON_PYTHON") or (
    os.path.join(ROOT, ".venv/bin/python") if os.path.exists(os.path.join(ROOT, ".venv/bin/python")) else sys.executable)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def run_json(cmd, timeout=1800):
    """Runs cmd; returns the JSON object on its last stdout line, or stops with its output."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-1500:]}\n{p.stderr[-2500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def busy_seconds():
    """CPU seconds every core of the host has been busy (/proc/stat: user, nice, system,
    irq, softirq; not idle, not waiting for I/O, not stolen by the hypervisor). The whole
    host: run nothing else beside a measurement."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def host_cpu(poseidon, tmp, ranks=2, link="100gbit", extra=("--scheme", "ps"), name="calibrate"):
    """What one training iteration costs the host: an fcnet lab job of `ranks` ranks on
    `link`, run for 6 and for 16 iterations, so that start-up cancels. Returns the host's
    busy CPU seconds per iteration (/proc/stat), the compute threads' CPU seconds per
    iteration (all ranks: rank 0's profile `cpu iteration_ms` times ranks), the bytes all
    ranks sent per iteration and the wall seconds per iteration."""
    busy, wall = {}, {}
    for n in (6, 16):
        profile = os.path.join(tmp, f"{name}-{ranks}-{link}-{n}.prof")
        if os.path.exists(profile):
            os.remove(profile)
        start, t = busy_seconds(), time.perf_counter()
        j = run_json([poseidon, "lab", "--ranks", str(ranks), "--bandwidth", link, "--", poseidon, "train",
                      "--model", "fcnet", "--synthetic", "--no-eval", "--json", "--iterations", str(n),
                      "--threads", "1", "--profile-out", profile] + list(extra))
        busy[n], wall[n] = busy_seconds() - start, time.perf_counter() - t
    with open(profile) as f:
        m = re.search(r"^cpu iteration_ms (\S+)", f.read(), re.M)
    if not m:
        raise SystemExit(f"{profile} has no 'cpu iteration_ms' line: is {poseidon} older than this script?")
    return {"busy_s": (busy[16] - busy[6]) / 10, "compute_cpu_s": ranks * float(m.group(1)) / 1e3,
            "sent_bytes": ranks * j["bytes_sent_per_iter"], "wall_s": (wall[16] - wall[6]) / 10}


def comm_cpu_rate(poseidon, tmp):
    """Bytes Poseidon's communication moves per CPU second of the host (the network stack,
    MPI, the copy and server threads together): host_cpu's 2-rank fcnet `--scheme ps` job on
    a 100 gbit link (the CPU, not tc, sets its pace); the host's busy CPU less the compute
    threads' own, over the bytes the ranks sent. Median of 3."""
    rates = []
    for r in range(3):
        h = host_cpu(poseidon, tmp)
        comm = h["busy_s"] - h["compute_cpu_s"]
        if comm <= 0:
            raise SystemExit("communication's CPU time came out at or below zero: was something else running?")
        rates.append(h["sent_bytes"] / comm)
    return median(rates)


def mpirun(ranks, poseidon):
    return ["mpirun", "-np", str(ranks), "--oversubscribe", poseidon]


def median(values):
    return statistics.median(values)


def pyplot():
    """matplotlib's pyplot drawing into files (Agg), or None, said on stderr, when missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (apt-get install python3-matplotlib): no PNG written", file=sys.stderr)
        return None
    return plt


def process_setup():
    """python/poseidon/process_setup.py on its own (ctypes only; the package needs torch and
    its built extension): the process settings poseidon.init() makes, for the benchmarks."""
    spec = importlib.util.spec_from_file_location("process_setup", os.path.join(ROOT, "python/poseidon/process_setup.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine():
    """One line naming the host, for the reports."""
    return f"{platform.node()}, {os.cpu_count()} cores, {platform.platform()}"


def write_csv(path, rows, fieldnames):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fieldnames, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def timed_steps(model, optimizer, x, y, iterations):
    """Seconds of each of `iterations` training steps on one batch (cross-entropy, backward,
    optimizer step, zero_grad): the loop the rank scripts time. On a GPU each step's time
    ends when the GPU has finished it (a measurement's synchronisation, not the loop's)."""
    import time

    import torch
    import torch.nn.functional as F
    gpu = x.is_cuda
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        if gpu:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times
