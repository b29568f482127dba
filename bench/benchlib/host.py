"""The host's CPU, measured around lab jobs: what an iteration costs the host, and the bytes
Poseidon's communication moves per CPU second (the simulator's --stack-rate)."""
import os
import re
import time

from benchlib.jobs import synthetic_train
from benchlib.lab import run_ranks
from benchlib.rounds import median


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
        j = run_ranks(poseidon, ranks, link, synthetic_train(poseidon, "fcnet", n, ["--threads", "1", "--profile-out",
                                                                                    profile] + list(extra)))
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
    for _ in range(3):
        h = host_cpu(poseidon, tmp)
        comm = h["busy_s"] - h["compute_cpu_s"]
        if comm <= 0:
            raise SystemExit("communication's CPU time came out at or below zero: was something else running?")
        rates.append(h["sent_bytes"] / comm)
    return median(rates)
