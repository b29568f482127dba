"""Helpers shared by the benchmark scripts: run `poseidon` with the thread settings of the
DESIGN.md measurements (one compute thread per rank) and read its JSON summary."""
import csv
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POSEIDON = os.path.join(ROOT, "build/apps/poseidon")  # the default binary of every script
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def run_json(cmd, timeout=1800):
    """Runs cmd; returns the JSON object on its last stdout line, or stops with its output."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-1500:]}\n{p.stderr[-2500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


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
    optimizer step, zero_grad): the loop the rank scripts time."""
    import time

    import torch.nn.functional as F
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - t0)
    return times
