"""The one lab runner: how every benchmark starts a job and reads its report. A multi-rank
job runs inside `poseidon lab` (each rank, or each node of ranks, behind its own link
capped by tc; needs root) or, without a link, under plain mpirun on shared memory. Every
job prints a JSON report as its last stdout line; `poseidon lab` also prints on stderr the
bytes each rank's (or node's) NIC sent."""
import json
import re
import subprocess

from benchlib.env import ENV


def launcher(poseidon, ranks, link=None, nodes=0):
    """The command that starts the program after it on `ranks` ranks: `poseidon lab` with
    each rank behind a `link` link (or, with `nodes`, each of `nodes` nodes of ranks/nodes
    ranks behind one), or mpirun on shared memory where there is no link."""
    if not link:
        return ["mpirun", "-np", str(ranks), "--oversubscribe"]
    placement = ["--nodes", str(nodes), "--ranks-per-node", str(ranks // nodes)] if nodes else ["--ranks", str(ranks)]
    return [poseidon, "lab"] + placement + ["--bandwidth", link, "--"]


def run(cmd, timeout=1800):
    """Runs cmd to its end; returns the finished process, or stops with the tail of its output."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
    if p.returncode != 0:
        fail(cmd, p.returncode, p.stdout, p.stderr)
    return p


def fail(cmd, returncode, stdout, stderr):
    raise SystemExit(f"{' '.join(cmd)} failed ({returncode}):\n{stdout[-1500:]}\n{stderr[-2500:]}")


def json_report(stdout):
    """The JSON object on a job's last stdout line."""
    return json.loads(stdout.strip().splitlines()[-1])


def run_json(cmd, timeout=1800):
    """Runs cmd (a job, or one process such as `poseidon train --baseline` or `poseidon
    simulate`); returns its JSON report."""
    return json_report(run(cmd, timeout).stdout)


def run_ranks(poseidon, ranks, link, program, timeout=1800, nodes=0):
    """Runs `program` on `ranks` ranks (see launcher); returns its JSON report."""
    return run_json(launcher(poseidon, ranks, link, nodes) + program, timeout)


def run_lab_nic(poseidon, ranks, link, program, timeout=3600, nodes=0):
    """Runs `program` in the lab; returns its JSON report and the bytes sent at each rank's
    (with `nodes`, each node's) NIC, as the lab counted them."""
    p = run(launcher(poseidon, ranks, link, nodes) + program, timeout)
    m = re.search(r"bytes sent at each (?:node|rank)'s NIC: ([0-9 -]+)", p.stderr)
    return json_report(p.stdout), [int(x) for x in m.group(1).split()] if m else []


def compute_ceiling(cmd, ranks, timeout=1800):
    """Runs `ranks` copies of cmd at once (no network, no MPI): the compute ceiling, every
    rank a plain process; returns their JSON reports."""
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for _ in range(ranks)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            fail(cmd, p.returncode, out, err)
        reports.append(json_report(out))
    return reports
