#!/usr/bin/env python3
"""A user's uncaught exception ends the whole job promptly (as under Horovod or DDP): runs
a small training under mpirun in which one rank or every rank raises after a few steps (and
once one rank inside a try/finally that closes the model: close() then returns at once), and
checks that mpirun exits non-zero within --limit seconds (the sync timeout is 120 s) with the
error's text in its output; each rank feeds its own batch size. A model that truly differs
by rank (a layer's width) stops at start-up with the first difference named. Then a rank that stalls (alive, so the launcher cannot tell) in a
3-rank job on the parameter server with a 5 s timeout, the others' loops raising their
timeouts as they come, or closing the model in a `finally:` on the way up: the job ends
within --stall-limit seconds with an error that names the stalled rank ("rank 1 sent no
update"), whichever other rank's wait runs out first. The same by allreduce, where no
collective can tell who is missing: the others' progress probe names it ("rank 1 has ended
3 iterations").

    PYTHONPATH=build/python .venv/bin/python tests/python/user_error.py
"""
import argparse
import os
import subprocess
import sys
import time

TRAIN = r"""
import sys, time, torch, torch.nn.functional as F, poseidon
poseidon.init()
width = 33 if sys.argv[1] == "mismatch" and poseidon.rank() == 1 else 32  # a model that truly differs
net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
stall = sys.argv[1].startswith("stall")
scheme = "allreduce" if sys.argv[1].endswith("allreduce") else "ps"
model = poseidon.DistributedModel(net, opt, **({"timeout": 5, "scheme": scheme} if stall else {}))
failing = sys.argv[1] == "all" or poseidon.rank() == 1
try:
    for step in range(50):
        if step == 3 and failing:
            if stall:
                time.sleep(600)  # alive, so the launcher cannot tell
            raise RuntimeError("a bug in the user's loop on rank %d" % poseidon.rank())
        batch = 8 + poseidon.rank()  # inputs may differ by rank; models may not
        F.cross_entropy(model(torch.randn(batch, 1, 8, 8)), torch.randint(0, 4, (batch,))).backward()
        opt.step()
        opt.zero_grad()
finally:
    if sys.argv[1].endswith("finally"):
        model.close()
model.close()
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--limit", type=float, default=15.0)
    ap.add_argument("--stall-limit", type=float, default=40.0,
                    help="seconds for the stall cases: start-up, 3 steps, the 5 s timeout, the grace")
    a = ap.parse_args()
    failed = []
    for on in ("one", "all", "finally", "stall", "stall-finally", "stall-allreduce", "mismatch"):
        want = "rank 1 has ended 3 iterations" if on.endswith("allreduce") else "rank 1 sent no update"
        ranks, limit, want = (3, a.stall_limit, want) if on.startswith("stall") else (
            a.ranks, a.limit, "a bug in the user's loop")
        if on == "mismatch":  # stops at start-up, naming the first difference
            want = "1/fc[33x64,33]"
        start = time.monotonic()
        p = subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), sys.executable,
                            "-c", TRAIN, on], capture_output=True, text=True, timeout=300, env=os.environ)
        took = time.monotonic() - start
        text = p.stdout + p.stderr
        ok = p.returncode != 0 and took < limit and want in text
        print(f"error on {on}: mpirun exit {p.returncode} after {took:.1f} s, error text "
              f"{'shown' if want in text else 'MISSING'}: {'ok' if ok else 'FAIL'}", flush=True)
        if not ok:
            print(text[-3000:], file=sys.stderr)
            failed.append(on)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
