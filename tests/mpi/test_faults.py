"""End-to-end: ranks that stall, straggle, fail, die or disagree. The job ends within its
deadline naming the rank, with no process left behind; stragglers and bounded staleness
keep the parameters consistent."""
import json
import math
import re
import tempfile
import time

from e2e import ENV, mpirun, run, train, expect_failure, leftovers, names_silent_rank


PHASES = ["startup", "broadcast", "iteration", "checkpoint", "finish"]


def phase_fault(args, action, phase, timeout=5, scheme="ps"):
    """Runs 3 ranks with POSEIDON_FAULT making rank 1 `action` at `phase`; returns the exit
    code, stderr, the seconds from the fault to the job's end, and the error lines."""
    with tempfile.TemporaryDirectory() as tmp:
        # Iterations: the checkpoint of iteration 4 comes before the end; the fault on
        # "iteration" fires at the 3rd iteration's end, mid-run.
        env = dict(ENV, POSEIDON_FAULT=f"1:{phase}:{action}:3" if phase == "iteration" else f"1:{phase}:{action}")
        cmd = mpirun(3) + [args.poseidon, "train", "--model", "mlp", "--iterations", "8", "--scheme", scheme,
                           "--timeout", str(timeout), "--synthetic", "--no-eval",
                           "--checkpoint-dir", f"{tmp}/ck", "--checkpoint-every", "4"]
        rc, out, err, secs = run(cmd, 120, env)
        end = time.time()
    m = re.search(r"POSEIDON_FAULT: \w+ at phase \w+ \(time ([0-9.]+)\)", err)
    assert m, f"the fault at phase {phase} never fired:\n{err[-2000:]}"
    errors = [l for l in err.splitlines() if l.startswith("poseidon: error:")]
    return rc, err, end - float(m.group(1)), errors


def test_np3_straggler_dropped(args):
    # Rank 2 stalls 3 s at iteration 5; with --straggler-timeout 0.3 the others go on without
    # its updates, it continues with fresh parameters, and all end with the same parameters.
    env = dict(ENV, POSEIDON_FAULT_DELAY="2:5:3000")
    common = ["--model", "mlp", "--iterations", "20", "--no-eval", "--json", "--scheme", "ps"]
    cmd = mpirun(3) + [args.poseidon, "train"] + common + ["--straggler-timeout", "0.3"]
    rc, out, err, secs = run(cmd, 300, env)
    assert rc == 0, f"exit {rc}\n{err[-2000:]}"
    r = json.loads(out.strip().splitlines()[-1])
    print(f"dropped {r['straggler_dropped_updates']} updates, {r['straggler_late_updates']} came late; "
          f"run took {secs:.1f} s")
    assert "stalling 3000 ms" in err, err[-1000:]
    assert r["straggler_dropped_updates"] > 0, r
    assert "straggler updates dropped" in out, out[-1500:]
    assert math.isfinite(r["train_loss"]), r


def test_np3_straggler_no_false_drops(args):
    # Without a straggler, a generous deadline drops nothing and changes nothing.
    common = ["--model", "mlp", "--iterations", "15", "--no-eval", "--json", "--scheme", "ps", "--seed", "4"]
    a, _ = train(args, 3, common + ["--straggler-timeout", "20"])
    b, _ = train(args, 3, common)
    assert a["straggler_dropped_updates"] == 0 and a["straggler_late_updates"] == 0, a
    assert a["param_digest"] == b["param_digest"], f"{a['param_digest']} vs {b['param_digest']}"
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--iterations", "2", "--synthetic",
                                      "--scheme", "sfb", "--straggler-timeout", "1"], "--scheme ps")
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--iterations", "2", "--synthetic",
                                      "--straggler-timeout", "200"], "shorter than --timeout")


def test_np3_ssp_bound(args):
    # Rank 2 stalls 2 s at iteration 5. With --staleness 2 the others run ahead and then
    # wait: the stalest read any worker makes lacks exactly 2 iterations' updates, never 3.
    # Without a stall, staleness 2 still trains to the same loss range, and staleness 0 is
    # BSP bit for bit.
    common = ["--model", "mlp", "--iterations", "20", "--no-eval", "--json", "--scheme", "ps", "--seed", "6"]
    env = dict(ENV, POSEIDON_FAULT_DELAY="2:5:2000")
    r, _ = train(args, 3, common + ["--staleness", "2"], env=env)
    print(f"staleness 2 with a stalled rank: max staleness seen {r['max_staleness_seen']}, loss {r['train_loss']:.4f}")
    assert r["staleness"] == 2 and r["max_staleness_seen"] == 2, r
    one, _ = train(args, 3, common + ["--staleness", "1"], env=env)
    assert one["max_staleness_seen"] == 1, one
    bsp, _ = train(args, 3, common)
    zero, _ = train(args, 3, common + ["--staleness", "0"])
    assert zero["param_digest"] == bsp["param_digest"] and zero["max_staleness_seen"] == 0, (zero, bsp)
    assert abs(r["train_loss"] - bsp["train_loss"]) < 0.5, f"SSP loss {r['train_loss']} vs BSP {bsp['train_loss']}"
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--iterations", "2", "--synthetic",
                                      "--scheme", "sfb", "--staleness", "1"], "--scheme ps")
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--iterations", "2", "--synthetic",
                                      "--scheme", "ps", "--staleness", "-1"], "--staleness")


def test_ranks_disagree(args):
    cmd = ["mpirun", "--oversubscribe", "-np", "1", args.poseidon, "train", "--model", "mlp", "--batch", "32",
           ":", "-np", "1", args.poseidon, "train", "--model", "mlp", "--batch", "16"]
    expect_failure(args, cmd, "different model or configuration")
    # Differing cost models must be caught before the time model's start-up probe.
    cmd = ["mpirun", "--oversubscribe", "-np", "1", args.poseidon, "train", "--model", "mlp", "--cost-model", "time",
           ":", "-np", "1", args.poseidon, "train", "--model", "mlp", "--cost-model", "bytes"]
    expect_failure(args, cmd, "different model or configuration", timeout=60)


def stalled_job(args, scheme, timeout=5):
    """Runs 3 ranks whose rank 1 hangs in its loop at iteration 5 (alive, so the launcher
    cannot tell); checks that the job fails within twice the timeout with no process left
    behind, and returns its exit code, seconds and error lines."""
    env = dict(ENV, POSEIDON_FAULT_DELAY="1:5:600000")
    cmd = mpirun(3) + [args.poseidon, "train", "--model", "mlp", "--iterations", "400", "--scheme", scheme,
                       "--timeout", str(timeout), "--synthetic", "--no-eval"]
    rc, out, err, secs = run(cmd, 120, env)
    assert rc != 0, "the job must fail when a rank stalls"
    assert secs < 2 * timeout + 15, f"the job took {secs:.1f} s to end after a rank stalled"
    errors = [l for l in err.splitlines() if l.startswith("poseidon: error:")]
    assert errors, f"no one-line error:\n{err[-2000:]}"
    left = leftovers()
    assert not left, f"processes left behind: {left}"
    return rc, secs, errors


def test_rank_stalls(args):
    # The others time out and name it: its shard heard nothing from it ("rank 1 sent no
    # update"), or a rank whose shards went silent asked and heard it is behind.
    rc, secs, errors = stalled_job(args, "ps")
    assert any(re.search(r"\brank 1 (sent no update|has ended)", l) for l in errors), "\n".join(errors)
    print(f"ok: rank 1 stalled; the job ended with exit {rc} after {secs:.1f} s: {errors[0][:200]}")


def test_rank_dies(args):
    timeout = 10
    env = dict(ENV, POSEIDON_FAULT_EXIT="1:5")
    cmd = mpirun(3) + [args.poseidon, "train", "--model", "mlp", "--iterations", "400", "--timeout", str(timeout)]
    rc, out, err, secs = run(cmd, 120, env)
    assert rc != 0, "the job must fail when a rank dies"
    assert secs < 2 * timeout + 15, f"the job took {secs:.1f} s to end after a rank died"
    assert "dying at iteration 5" in err, err[-2000:]
    # The launcher names the lost process: OpenMPI's name for rank 1 is [[job,1],1].
    assert re.search(r"\[\[\d+,\d+\],1\]", err) and "Exit code:    17" in err, err[-2000:]
    left = leftovers()
    assert not left, f"processes left behind: {left}"
    print(f"ok: a rank died at iteration 5; the job ended with exit {rc} after {secs:.1f} s")


def test_rank_stalls_each_phase(args):
    # A rank that hangs (SIGSTOP: alive, so the launcher cannot tell) at each phase: the
    # others end the job within --timeout + 10 s, naming it, and no process is left.
    timeout = 5
    for phase in PHASES:
        rc, err, secs, errors = phase_fault(args, "stop", phase, timeout)
        assert rc != 0, f"{phase}: the job must fail when rank 1 stalls"
        assert secs < timeout + 10, f"{phase}: the job took {secs:.1f} s to end after rank 1 stalled"
        assert any(names_silent_rank(l, 1) for l in errors), (
            f"{phase}: no error names rank 1:\n" + ("\n".join(errors) or err[-2000:]))
        left = leftovers("--iterations 8")
        assert not left, f"{phase}: processes left behind: {left}"
        print(f"ok: stall at {phase}: ended after {secs:.1f} s (bound {timeout + 10}): {errors[0][:160]}")


def test_rank_fails_each_phase(args):
    # A rank whose code throws at each phase: it unwinds (its threads stop in order, no
    # closing barrier, no wait running out its deadline) and the job ends at once with its
    # one-line error: well within --timeout, which any wait left in the teardown would take.
    timeout = 5
    for phase in PHASES:
        rc, err, secs, errors = phase_fault(args, "throw", phase, timeout)
        assert rc != 0, f"{phase}: the job must fail when rank 1 fails"
        assert secs < 3, f"{phase}: the job took {secs:.1f} s to end after rank 1 failed"
        assert any("injected failure at phase " + phase in l for l in errors), (
            f"{phase}: rank 1's error is not reported:\n" + ("\n".join(errors) or err[-2000:]))
        assert "Sanitizer" not in err and "terminate called" not in err and "Segmentation" not in err, (
            f"{phase}: a crash while tearing down:\n{err[-3000:]}")
        left = leftovers("--iterations 8")
        assert not left, f"{phase}: processes left behind: {left}"
        print(f"ok: failure at {phase}: ended after {secs:.1f} s: {errors[0][:160]}")


def test_allreduce_rank_fails_or_stalls(args):
    # Every layer by allreduce, whose collectives the transport's progress thread completes
    # for the comm threads (mpi_request_poller.h): a rank that throws mid-run ends the job at
    # once with its error, and one that stalls ends it within --timeout + 10 s (the others'
    # collectives give up on it, and stopping does not wait for what they gave up on), with
    # no crash in the teardown and no process left behind. A collective cannot say who did
    # not join; the others' progress probe names the stopped rank as the one that did not
    # answer (client/progress_probe.h).
    timeout = 5
    for action, bound in (("throw", 3), ("stop", timeout + 10)):
        rc, err, secs, errors = phase_fault(args, action, "iteration", timeout, scheme="allreduce")
        assert rc != 0, f"{action}: the job must fail"
        assert secs < bound, f"{action}: the job took {secs:.1f} s to end (bound {bound})"
        assert errors, f"{action}: no one-line error:\n{err[-2000:]}"
        if action == "throw":
            assert any("injected failure at phase iteration" in l for l in errors), "\n".join(errors)
        else:
            assert any(names_silent_rank(l, 1) for l in errors), "no error names rank 1:\n" + "\n".join(errors)
        assert "Sanitizer" not in err and "terminate called" not in err and "Segmentation" not in err, (
            f"{action}: a crash while tearing down:\n{err[-3000:]}")
        left = leftovers("--iterations 8")
        assert not left, f"{action}: processes left behind: {left}"
        print(f"ok: {action} with allreduce layers: ended after {secs:.1f} s: {errors[0][:160]}")


def test_allreduce_rank_stalls_in_its_loop(args):
    # Under allreduce no message of its is missed; the others' progress probe names it as
    # behind (its transport thread answers), with the iterations each side has ended.
    rc, secs, errors = stalled_job(args, "allreduce")
    assert any(re.search(r"rank 1 has ended \d+ iterations?, this rank \d+", l) for l in errors), "\n".join(errors)
    print(f"ok: rank 1 stalled in its loop under allreduce; ended with exit {rc} after {secs:.1f} s: {errors[0][:240]}")
