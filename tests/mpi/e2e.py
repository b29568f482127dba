"""What the end-to-end cases (test_*.py here) share: the environment of their runs,
mpirun's command line, running a command under a deadline, `poseidon train` and its JSON
report, one-line errors, the cost model's bytes, parameter files, and finding the
processes a case left behind.

Each case runs real processes exchanging real bytes and fails with a message saying what
differed. Bad-input cases require a non-zero exit, a clear one-line error and no hang
(every run has a deadline).
"""
import json
import os
import re
import subprocess
import time

# Every run a case starts carries MARK in its environment, with a value unique to that
# case (conftest.py sets a new one before each): the processes a run leaves behind are
# found by it, never by matching command lines, which would see another case's runs.
MARK = "POSEIDON_E2E_CASE"
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")
ENV[MARK] = ""


def mpirun(n):
    return ["mpirun", "-np", str(n), "--oversubscribe", "--mca", "btl", "self,vader"]


def run(cmd, timeout=300, env=None):
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or ENV)
    return p.returncode, p.stdout, p.stderr, time.time() - start


def train(args, n, extra, timeout=300, env=None):
    cmd = (mpirun(n) if n > 0 else []) + [args.poseidon, "train"] + extra
    rc, out, err, secs = run(cmd, timeout, env)
    assert rc == 0, f"{' '.join(cmd)} exited {rc}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    report = json.loads(out.strip().splitlines()[-1]) if "--json" in extra else None
    return report, out


def plan(args, extra):
    rc, out, err, _ = run([args.poseidon, "plan"] + extra)
    assert rc == 0, f"plan failed: {err}"
    return out


def within(measured, model, tol, what):
    assert model > 0 and abs(measured - model) <= tol * model, (
        f"{what}: measured {measured:.0f} bytes/iter, cost model {model:.0f} (tolerance {tol:.0%})")


def expect_failure(args, cmd, phrase, timeout=120, env=None):
    rc, out, err, secs = run(cmd, timeout, env)
    assert rc != 0, f"{' '.join(cmd)} should fail but exited 0"
    errors = [l for l in err.splitlines() if l.startswith("poseidon: error:")]
    assert errors, f"no 'poseidon: error:' line on stderr:\n{err[-2000:]}"
    assert phrase in errors[0], f"error line does not mention '{phrase}': {errors[0]}"
    assert len(errors[0]) < 400, f"error line is not short: {errors[0]}"
    print(f"ok: exit {rc} after {secs:.1f} s: {errors[0]}")


def compare_params(path_a, path_b, tol, what):
    import numpy as np
    a = np.fromfile(path_a, np.float32).astype(np.float64)
    b = np.fromfile(path_b, np.float32).astype(np.float64)
    assert a.size == b.size, f"{what}: parameter counts {a.size} vs {b.size}"
    rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    print(f"{what}: relative parameter difference {rel:.3e}")
    assert rel <= tol, f"{what}: relative parameter difference {rel:.3e} over {tol}"


def marked_processes(mark=None):
    """{pid: command line} of the live processes whose environment holds MARK=mark (this
    case's value by default): what this case's runs started, and nothing of another's.
    A zombie's environment reads empty: it is not running anything."""
    want = f"{MARK}={mark if mark is not None else ENV[MARK]}".encode()
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found[int(pid)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def names_silent_rank(line, rank):
    """Whether an error line names `rank` as the one that went silent: "rank 1 sent no update",
    "ranks 1, 2 sent no update", "waiting for rank 1", "no fresh values from the shards on
    ranks 0, 1", the progress probe's "rank 1 has ended 3 iterations" and "ranks 1, 2 did not
    answer", or rank 1's own wait running out ("error: rank 1: ... did not happen within")."""
    r = rf"\b{rank}\b"
    return re.search(rf"ranks? [0-9, ]*{r}[0-9, ]* (sent no update|did not answer|ha(s|ve) ended)"
                     rf"|waiting for rank {r}"
                     rf"|no fresh values from the shards? on ranks? [0-9, ]*{r}"
                     rf"|error: rank {r}: .* did not happen within", line) is not None


def leftovers(iterations="--iterations 400"):
    """This case's processes (the launcher, a rank) still running `train --model mlp
    <iterations>` a second after its job ended."""
    time.sleep(1)
    pattern = " train --model mlp " + iterations
    return [f"{pid} {cmd}" for pid, cmd in marked_processes().items() if pattern in cmd]
