"""Helpers shared by the benchmark scripts: run `poseidon` with the thread settings of the
DESIGN.md measurements (one compute thread per rank) and read its JSON summary."""
import json
import os
import statistics
import subprocess

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def mpirun(ranks, poseidon):
    return ["mpirun", "-np", str(ranks), "--oversubscribe", poseidon]


def median(values):
    return statistics.median(values)
