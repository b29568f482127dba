"""Helpers shared by the benchmark scripts: run `poseidon` with the thread settings of the
DESIGN.md measurements (one compute thread per rank) and read its JSON summary."""
import json
import os
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
