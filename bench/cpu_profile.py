#!/usr/bin/env python3
"""Where the host's CPU goes while a torchvision model trains on 4 ranks in the lab, per
system (bench/torchvision_step.py): `perf record -a` samples every core for --seconds
while the job is past its start, then the samples are grouped by thread name and by
kernel or user space. Poseidon names its threads (poseidon-mpi: the MPI progress thread,
which drives the sockets; poseidon-server: the shard; poseidon-sync-N: the layer syncers);
DDP's gloo threads keep the interpreter's name (python3), so for DDP communication and
compute are not told apart. Needs root (the lab) and perf.

Core-seconds per iteration are each group's share of the samples times the cores times
the job's median seconds per iteration; idle shows as "swapper".

  sudo bench/cpu_profile.py --model resnet50 --link 10gbit --systems ddp,poseidon
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from common import ENV, POSEIDON, ROOT, machine

import papers_models

LINE = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+(\S.*?)\s*$")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--link", default="10gbit")
    ap.add_argument("--systems", default="ddp,poseidon")
    ap.add_argument("--iterations", type=int, default=24, help="long enough to outlast --delay + --seconds")
    ap.add_argument("--delay", type=float, default=30, help="seconds from the launch to the first sample")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--poseidon", default=POSEIDON)
    a = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("cpu_profile.py: perf is not installed (apt-get install linux-perf)")
    papers_models.like_poseidon()
    ENV["PYTHONPATH"] = os.path.join(ROOT, "build/python")
    cores = os.cpu_count() or 1
    print(f"# CPU by thread, {a.model} on 4 ranks, {a.link} lab; {machine()}")
    print(f"Made by: bench/cpu_profile.py {' '.join(sys.argv[1:])}\n")
    with tempfile.TemporaryDirectory() as tmp:
        for system in a.systems.split(","):
            s_per_iter, groups = profile(a, system, tmp)
            print(f"## {system}: {s_per_iter:.3f} s/iteration (median)\n")
            print("| threads | space | share of samples | core-s per iteration |")
            print("|---|---|---|---|")
            for (name, space), share in sorted(groups.items(), key=lambda kv: -kv[1]):
                if share >= 0.5:
                    print(f"| {name} | {space} | {share:.1f}% | {share / 100 * cores * s_per_iter:.3f} |")
            print(flush=True)


def profile(a, system, tmp):
    data = os.path.join(tmp, f"{system}.data")
    cmd = [a.poseidon, "lab", "--ranks", "4", "--bandwidth", a.link, "--", "/usr/bin/python3",
           os.path.join(ROOT, "bench/torchvision_step.py"), "--system", system, "--model", a.model,
           "--image-size", str(papers_models.SIZES.get(a.model, 32)), "--iterations", str(a.iterations)]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    time.sleep(a.delay)
    subprocess.run(["perf", "record", "-a", "-F", "499", "-o", data, "--", "sleep", str(a.seconds)],
                   capture_output=True, check=True)
    still_running = job.poll() is None
    out, err = job.communicate()
    if job.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({job.returncode}):\n{out[-1500:]}\n{err[-2500:]}")
    if not still_running:
        sys.exit(f"{system}: the job ended before the samples did: raise --iterations")
    s_per_iter = json.loads(out.strip().splitlines()[-1])["s_per_iter_median"]
    report = subprocess.run(["perf", "report", "-i", data, "--sort", "comm,dso", "--stdio"], capture_output=True,
                            text=True, check=True).stdout
    groups = {}
    for line in report.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        share, comm, dso = float(m.group(1)), m.group(2), m.group(3)
        name = "poseidon-sync-*" if comm.startswith("poseidon-sync") else comm
        space = "kernel" if "kernel" in dso else "user"
        groups[(name, space)] = groups.get((name, space), 0.0) + share
    return s_per_iter, groups


if __name__ == "__main__":
    main()
