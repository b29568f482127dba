#!/usr/bin/env python3
"""Where an iteration's host CPU goes (needs root for the lab): fcnet in `poseidon lab`,
for each rank count and link given, run for 6 and for 16 iterations (start-up cancels);
prints the host's busy CPU per iteration (/proc/stat: run nothing else), the compute
threads' share (their profile's `cpu iteration_ms`), the rest (communication: the network
stack, MPI, the copy and server threads) and the bytes it moved per CPU second: the figure
the simulator's host CPU bound takes as --stack-rate (docs/SIMULATOR.md).

  sudo bench/system/host_cpu.py --ranks 2,4 --links 100gbit,2gbit --scheme ps
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, machine, made_by  # noqa: E402
from benchlib.host import host_cpu  # noqa: E402
from benchlib.report import table_head  # noqa: E402


def main():
    p = arguments(__doc__)
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--links", default="100gbit,2gbit")
    p.add_argument("--scheme", default="ps")
    a = p.parse_args()
    cores = os.cpu_count() or 1
    print(f"# host CPU per fcnet iteration, --scheme {a.scheme}; {machine()}")
    print(made_by())
    print(table_head("ranks", "link", "s/iteration", "host busy core-s", "of the cores", "compute threads core-s",
                     "communication core-s", "MB sent", "communication GB per CPU s"))
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in map(int, a.ranks.split(",")):
            for link in a.links.split(","):
                h = host_cpu(a.poseidon, tmp, ranks, link, ["--scheme", a.scheme], name="host")
                comm = h["busy_s"] - h["compute_cpu_s"]
                rate = f"{h['sent_bytes'] / comm / 1e9:.2f}" if comm > 0 else "-"
                print(f"| {ranks} | {link} | {h['wall_s']:.3f} | {h['busy_s']:.2f} | "
                      f"{100 * h['busy_s'] / (h['wall_s'] * cores):.0f}% | {h['compute_cpu_s']:.2f} | {comm:.2f} | "
                      f"{h['sent_bytes'] / 1e6:.0f} | {rate} |", flush=True)


if __name__ == "__main__":
    main()
