#!/usr/bin/env python3
"""Issue 13, build item 4: the schedule rule against the byte and time rules. Two parts:

lab       (needs root) measured in the lab, as below.
simulate  `poseidon simulate --cost-model bytes|time|schedule` on the papers' models (GPU
          nodes, the calibrated device rate): predicted speedups per rule, seconds to run.

The time rule prices each layer's sync alone, as if all of it were exposed. The schedule
rule (`--cost-model schedule --profile FILE`) keeps the SFB/PS plan whose simulated
iteration (WFBP's overlap, the link in priority order, SFB's reconstruction on the compute
thread) is shortest. This script
 1. writes a profile of the model: one rank, one thread, --synthetic;
 2. per link, asks `poseidon plan --profile P --cost-model schedule` for both plans and their
    simulated iterations, with the link's rate and one GEMM rate (--gflops, or measured by
    one short `--cost-model time` run), the rates both rules then train with;
 3. where the plans differ, trains both in the lab, alternated, --repeats rounds: images/s
    medians and the paired ratio schedule / time (the median of the rounds' ratios).
Where the plans are the same there is nothing to measure: the row says so.
Each link is planned twice: without a host CPU bound, and with one (`--stack-rate`: the
bytes communication moves per host CPU second, measured first by benchlib.host.comm_cpu_rate; the
host's cores shared by all the lab's ranks), as the lab's ranks all share this host.

  sudo bench/features/schedule_rule.py lab --model fcnet --ranks 4 --links 1gbit,2gbit --repeats 3
  bench/features/schedule_rule.py simulate --models vgg19-22k,vgg19,alexnet --links 10gbit,40gbit
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments, machine, require_root  # noqa: E402
from benchlib.host import comm_cpu_rate  # noqa: E402
from benchlib.lab import launcher, run, run_json, run_ranks  # noqa: E402
from benchlib.rounds import median  # noqa: E402


def measured_gflops(a):
    """The GEMM rate the time rule measures at start-up on this host (2 ranks, one thread)."""
    p = run(launcher(a.poseidon, 2) + [a.poseidon, "train", "--model", a.model, "--synthetic", "--no-eval",
                                       "--iterations", "1", "--threads", "1", "--cost-model", "time"], timeout=600)
    m = re.search(r"GEMM ([0-9.]+) GFLOP/s", p.stdout)
    if not m:
        raise SystemExit(f"could not measure the GEMM rate:\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    return float(m.group(1))


def write_profile(a, path):
    run_json([a.poseidon, "train", "--model", a.model, "--synthetic", "--no-eval", "--json", "--threads", "1",
              "--iterations", "16", "--batch", str(a.batch), "--profile-out", path])


def plans(a, profile, link, gflops, stack):
    """(time rule's schemes, schedule rule's schemes, their simulated iterations)."""
    host = ["--host-cores", str(os.cpu_count()), "--nodes-per-host", str(a.ranks), "--stack-rate", stack] if stack else []
    out = run_json([a.poseidon, "plan", "--profile", profile, "--workers", str(a.ranks), "--batch", str(a.batch),
                    "--cost-model", "schedule", "--bandwidth", link, "--gemm-flops", f"{gflops:g}G", "--json"] + host)
    time_rule = [l["time_choice"] for l in out["layers"]]
    schedule = [l["scheme"] for l in out["layers"]]
    return time_rule, schedule, out["schedule"]["time_rule_iteration_s"], out["schedule"]["iteration_s"]


def train(a, link, rule, profile, gflops, stack):
    job = [a.poseidon, "train", "--model", a.model, "--synthetic", "--no-eval", "--json", "--threads", "1",
           "--iterations", str(a.iterations), "--batch", str(a.batch), "--cost-model", rule,
           "--bandwidth", link, "--gemm-flops", f"{gflops:g}G"]
    if rule == "schedule":
        job += ["--profile", profile] + (["--stack-rate", stack] if stack else [])
    j = run_ranks(a.poseidon, a.ranks, link, job, timeout=3600)
    return j["images_per_s"], [l["scheme"] for l in j["layers"]]


def simulated(a):
    """Speedup over one node per rule, from `poseidon simulate --system poseidon`."""
    print("# poseidon simulate, system poseidon, calibrated device rate; speedup over one node (SFB layers)")
    print(f"{'model':>10} {'link':>7} {'nodes':>5} {'bytes':>13} {'time':>13} {'schedule':>13} {'schedule/best':>13}")
    for model in a.models.split(","):
        for link in a.links.split(","):
            runs = {}
            for rule in ("bytes", "time", "schedule"):
                j = run_json([a.poseidon, "simulate", "--model", model, "--sweep", a.nodes, "--system", "poseidon",
                              "--bandwidth", link, "--cost-model", rule, "--json"])
                runs[rule] = {r["nodes"]: r for r in j["runs"]}
            for n in sorted(runs["bytes"]):
                cells = [f"{runs[r][n]['speedup']:7.2f}x ({runs[r][n]['sfb_layers']})" for r in ("bytes", "time", "schedule")]
                best = max(runs["bytes"][n]["speedup"], runs["time"][n]["speedup"])
                print(f"{model:>10} {link:>7} {n:5d} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} "
                      f"{runs['schedule'][n]['speedup'] / best:13.3f}", flush=True)


def main():
    p = arguments(__doc__)
    p.add_argument("part", choices=["lab", "simulate"])
    p.add_argument("--models", default="vgg19-22k,vgg19,alexnet", help="simulate: built-in models")
    p.add_argument("--nodes", default="8,32,128", help="simulate: node counts")
    p.add_argument("--model", default="fcnet", help="lab: the CLI model")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--links", default="", help="lab: 1gbit,2gbit; simulate: 10gbit,40gbit")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--iterations", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--gflops", type=float, default=0, help="GEMM rate for both rules (default: measured)")
    p.add_argument("--stack-rate", default="", help="bytes per host CPU second, e.g. 500MB (default: measured)")
    a = p.parse_args()
    if a.part == "simulate":
        a.links = a.links or "10gbit,40gbit"
        return simulated(a)
    a.links = a.links or "1gbit,2gbit"
    require_root()
    gflops = a.gflops or measured_gflops(a)
    tmp = tempfile.mkdtemp()
    stack = a.stack_rate or f"{comm_cpu_rate(a.poseidon, tmp) / 1e6:.0f}MB"
    print(f"# {machine()}; {a.model}, {a.ranks} ranks, batch {a.batch}, {a.iterations} iterations, GEMM "
          f"{gflops:g} GFLOP/s, stack rate {stack} per CPU second, {a.repeats} rounds (time rule, then schedule rule)",
          flush=True)
    profile = os.path.join(tmp, f"{a.model}.prof")
    write_profile(a, profile)
    print(f"{'link':>6} {'host CPU':>8} {'time rule plan':>28} {'schedule plan':>28} {'sim time':>9} {'sim sched':>9} "
          f"{'img/s time':>10} {'img/s sched':>11} {'paired':>7} {'sim ratio':>9}", flush=True)
    for link, bound in [(l, b) for l in a.links.split(",") for b in ("", stack)]:
        time_plan, sched_plan, sim_time, sim_sched = plans(a, profile, link, gflops, bound)
        row = f"{link:>6} {'yes' if bound else 'no':>8} {','.join(time_plan):>28} {','.join(sched_plan):>28} {sim_time:9.3f} {sim_sched:9.3f}"
        if time_plan == sched_plan:
            print(row + "  (same plan: nothing to measure)", flush=True)
            continue
        rounds = []
        for r in range(a.repeats):
            t, t_plan = train(a, link, "time", profile, gflops, bound)
            s, s_plan = train(a, link, "schedule", profile, gflops, bound)
            if s_plan != sched_plan or t_plan != time_plan:
                sys.exit(f"the runs trained other plans than `plan` printed: {t_plan} / {s_plan}")
            rounds.append((t, s))
            print(f"#   round {r + 1}: time rule {t:.1f} img/s, schedule rule {s:.1f} img/s, {s / t:.3f}", flush=True)
        paired = median([s / t for t, s in rounds])
        print(row + f" {median([t for t, _ in rounds]):10.1f} {median([s for _, s in rounds]):11.1f} "
              f"{paired:7.3f} {sim_time / sim_sched:9.3f}", flush=True)


if __name__ == "__main__":
    main()
