#!/usr/bin/env python3
"""Where the host's CPU goes while a torchvision model trains in the lab, per system
(bench/jobs/torchvision_train.py): `perf record -e cpu-clock -a` samples every core for
--seconds while the job is past its start, then the samples are grouped by thread name and
by kernel or user space, and each group's hottest functions are listed. Poseidon names its
threads (poseidon-mpi: the MPI progress thread, which drives the sockets; poseidon-server:
the shard; poseidon-sync-N: the layer syncers); DDP's gloo threads keep the interpreter's
name (python3), so for DDP communication and compute are not told apart. Needs root (the
lab) and perf.

Core-seconds per iteration are each group's share of the samples times the cores times
the job's median seconds per iteration (cpu-clock samples idle cores too: "swapper").

  sudo bench/system/cpu_by_thread.py --model resnet50 --link 10gbit --systems ddp,poseidon
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, ENV, like_poseidon, machine, made_by, script_name, use_build_python  # noqa: E402
from benchlib.jobs import torchvision_train  # noqa: E402
from benchlib.lab import fail, json_report, launcher  # noqa: E402
from benchlib.report import table_head  # noqa: E402

TOP_SYMBOLS = 4


def main():
    ap = arguments(__doc__)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--link", default="10gbit")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--systems", default="ddp,poseidon")
    ap.add_argument("--iterations", type=int, default=24, help="long enough to outlast --delay + --seconds")
    ap.add_argument("--delay", type=float, default=30, help="seconds from the launch to the first sample")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--callers", metavar="SYMBOL",
                    help="also record call chains (frame pointers) and print who calls SYMBOL, e.g. "
                         "__memmove_avx_unaligned_erms")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep each system's perf.data as DIR/SYSTEM.data, for `perf report` beyond the table")
    a = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit(f"{script_name()}: perf is not installed (apt-get install linux-perf)")
    like_poseidon()
    use_build_python()
    cores = os.cpu_count() or 1
    print(f"# CPU by thread, {a.model} on {a.ranks} ranks, {a.link} lab; {machine()}")
    print(made_by() + "\n")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = a.keep or scratch
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
        for system in a.systems.split(","):
            s_per_iter, groups = profile(a, system, tmp)
            print(f"## {system}: {s_per_iter:.3f} s/iteration (median)\n")
            print_groups(groups, cores * s_per_iter)
            if a.callers:
                print_callers(os.path.join(tmp, f"{system}.data"), a.callers)


def print_groups(groups, core_s):
    """Groups of at least 0.5% of the samples, the rest as "others"; per group its hottest
    functions."""
    print(table_head("threads", "space", "share of samples", "core-s per iteration", "hottest functions (share)"))
    others = 0.0
    for (name, space), (share, symbols) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        if share < 0.5:
            others += share
            continue
        top = sorted(symbols.items(), key=lambda kv: -kv[1])[:TOP_SYMBOLS]
        hot = ", ".join(f"{sym[:48]} {s:.1f}%" for sym, s in top if s >= 0.1)
        print(f"| {name} | {space} | {share:.1f}% | {share / 100 * core_s:.3f} | {hot} |")
    print(f"| others | | {others:.1f}% | {others / 100 * core_s:.3f} | |\n", flush=True)


def print_callers(data, symbol):
    """The call chains into `symbol`, per thread, caller-first, those of 1% of its samples
    and more (libraries built without frame pointers end a chain early)."""
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--no-inline", "--sort", "comm,sym",
                          "--symbols", symbol, "-g", "caller,1,callee,function,percent", "--stdio"],
                         capture_output=True, text=True, check=True).stdout
    lines = [l for l in out.splitlines() if l.strip() and not l.startswith("#")]
    print(f"Callers of {symbol}:\n```\n" + "\n".join(lines) + "\n```\n", flush=True)


def profile(a, system, tmp):
    """Runs the job, samples it; returns its median s/iteration and the samples' shares per
    (thread group, space), each with its shares per function."""
    data = os.path.join(tmp, f"{system}.data")
    cmd = launcher(a.poseidon, a.ranks, a.link) + torchvision_train(system, a.model, a.iterations)
    out_path, err_path = os.path.join(tmp, "job.out"), os.path.join(tmp, "job.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        # Files, not pipes: nobody reads while perf samples. Its own session: stopped whole.
        job = subprocess.Popen(cmd, stdout=out, stderr=err, env=ENV, start_new_session=True)
        try:
            time.sleep(a.delay)
            chains = ["--call-graph", "fp"] if a.callers else []
            subprocess.run(["perf", "record", "-e", "cpu-clock", "-a", "-F", "499"] + chains + ["-o", data, "--", "sleep",
                            str(a.seconds)], capture_output=True, check=True)
            still_running = job.poll() is None
            job.wait()
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGTERM)
                job.wait()
    with open(out_path) as f:
        stdout = f.read()
    if job.returncode != 0:
        with open(err_path) as f:
            fail(cmd, job.returncode, stdout, f.read())
    if not still_running:
        sys.exit(f"{system}: the job ended before the samples did: raise --iterations")
    s_per_iter = json_report(stdout)["s_per_iter_median"]
    return s_per_iter, group(report(data, "comm,dso"), report(data, "comm,dso,sym"))


def report(data, keys):
    # Flat shares, self time only, whether or not call chains were recorded (--callers).
    return subprocess.run(["perf", "report", "-i", data, "--no-children", "-g", "none", "--sort", keys, "--stdio"],
                          capture_output=True, text=True, check=True).stdout


# "  2.34%  poseidon-mpi  [kernel.kallsyms]  [k] _raw_spin_unlock_irqrestore": a DSO may hold
# spaces ("[JIT] tid 21191"); [k] marks kernel space, modules ([veth], [sch_tbf]) included.
BY_SYMBOL = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+(.+?)\s+\[([.k])\]\s+(.*?)\s*$")
# "  15.35%  poseidon-mpi  [kernel.kallsyms]"
BY_DSO = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+(\S.*?)\s*$")


def group(by_dso, by_symbol):
    """Shares per (thread group, space) from the per-DSO report, which sums to 100%; the
    hottest functions from the per-symbol one, which can sum to more (114% in one run, the
    excess all in the interpreter's threads, whose JIT-compiled code it lists by address)."""
    groups, kernel_dsos = {}, set()
    for line in by_symbol.splitlines():
        m = BY_SYMBOL.match(line)
        if not m:
            continue
        share, comm, dso, space, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
        if space == "k":
            kernel_dsos.add(dso)
        key = (thread_group(comm), "kernel" if space == "k" else "user")
        symbols = groups.setdefault(key, [0.0, {}])[1]
        symbols[sym] = symbols.get(sym, 0.0) + share
    for line in by_dso.splitlines():
        m = BY_DSO.match(line)
        if not m or m.group(3).startswith("Shared Object"):
            continue
        share, comm, dso = float(m.group(1)), m.group(2), m.group(3)
        key = (thread_group(comm), "kernel" if dso in kernel_dsos or dso == "[kernel.kallsyms]" else "user")
        groups.setdefault(key, [0.0, {}])[0] += share
    return groups


def thread_group(comm):
    return "poseidon-sync-*" if comm.startswith("poseidon-sync") else comm


if __name__ == "__main__":
    main()
