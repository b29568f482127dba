"""End-to-end: checkpoints. A run killed and resumed ends where one that ran through ends;
damaged, foreign or missing checkpoints are one-line errors that change nothing; a full
disk leaves the previous checkpoint intact."""
import os
import shutil
import subprocess
import tempfile

import pytest

from e2e import ENV, mpirun, run, train, expect_failure


def tree_digest(folder):
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), folder)] = hash(fh.read())
    return out


def test_np3_resume_exact(args):
    # A run killed after its checkpoint of iteration 10 and resumed ends with the same
    # parameters as one that ran through, for PS, SFB and allreduce layers, and PS and
    # allreduce layers on a 16-bit wire with error feedback (its residuals are in the
    # checkpoint: the pushes' and updates', the buckets' contributions' and their owners'
    # updates').
    feedback = ["--wire", "bf16", "--error-feedback"]
    for scheme, extra in [("ps", []), ("sfb", []), ("allreduce", []), ("ps", feedback), ("allreduce", feedback)]:
        tmp = tempfile.mkdtemp()
        try:
            common = ["--model", "mlp", "--iterations", "30", "--no-eval", "--json", "--seed", "9",
                      "--scheme", scheme] + extra
            a, _ = train(args, 3, common)
            env = dict(ENV, POSEIDON_FAULT_EXIT="1:17")
            cmd = mpirun(3) + [args.poseidon, "train"] + common + ["--checkpoint-dir", f"{tmp}/ck",
                                                                   "--checkpoint-every", "10"]
            rc, out, err, secs = run(cmd, 300, env)
            assert rc != 0 and "dying at iteration 17" in err, f"the run was meant to die: rc {rc}\n{err[-1500:]}"
            with open(f"{tmp}/ck/LATEST") as f:
                assert f.read().strip() == "iter-00000010", "LATEST does not name the checkpoint of iteration 10"
            c, out = train(args, 3, common + ["--resume", f"{tmp}/ck", "--checkpoint-dir", f"{tmp}/ck",
                                              "--checkpoint-every", "10"])
            assert "resumed from" in out and "at iteration 10" in out, out[-1500:]
            print(f"{scheme} {' '.join(extra)}: uninterrupted {a['param_digest']}, resumed {c['param_digest']}")
            assert a["param_digest"] == c["param_digest"], f"{scheme} {extra}: resumed run ends elsewhere"
            with open(f"{tmp}/ck/LATEST") as f:
                assert f.read().strip() == "iter-00000030", "the resumed run saved no checkpoint at 30"
        finally:
            shutil.rmtree(tmp)


def test_np3_resume_exact_resnet_adam(args, tmp):
    # Resumed from the checkpoint of iteration 5: the same parameters, BatchNorm buffers and
    # Adam state (moments and step counts) as a run that went through.
    common = ["--model", "resnet", "--optimizer", "adam", "--iterations", "12", "--no-eval", "--json",
              "--synthetic", "--seed", "9"]
    a, _ = train(args, 3, common)
    env = dict(ENV, POSEIDON_FAULT_EXIT="1:8")
    cmd = mpirun(3) + [args.poseidon, "train"] + common + ["--checkpoint-dir", f"{tmp}/ck", "--checkpoint-every", "5"]
    rc, out, err, secs = run(cmd, 300, env)
    assert rc != 0 and "dying at iteration 8" in err, f"the run was meant to die: rc {rc}\n{err[-1500:]}"
    with open(f"{tmp}/ck/LATEST") as f:
        assert f.read().strip() == "iter-00000005", "LATEST does not name the checkpoint of iteration 5"
    c, out = train(args, 3, common + ["--resume", f"{tmp}/ck"])
    assert "resumed from" in out and "at iteration 5" in out, out[-1500:]
    print(f"resnet + adam: uninterrupted {a['param_digest']}, resumed {c['param_digest']}")
    assert a["param_digest"] == c["param_digest"], "the resumed run ends elsewhere"
    # The optimizer's state is part of the checkpoint: another optimizer is refused.
    expect_failure(args, mpirun(3) + [args.poseidon, "train"] + [x if x != "adam" else "adamw" for x in common] +
                   ["--resume", f"{tmp}/ck"], "other settings")


def test_bad_checkpoints(args, tmp):
    base = ["--model", "mlp", "--no-eval", "--synthetic"]
    flags = base + ["--iterations", "20"]
    env = dict(ENV, POSEIDON_FAULT_EXIT="0:15")
    rc, out, err, secs = run(mpirun(2) + [args.poseidon, "train"] + flags +
                             ["--checkpoint-dir", f"{tmp}/ck", "--checkpoint-every", "10"], 300, env)
    assert rc != 0, "the run was meant to die at iteration 15"
    before = tree_digest(f"{tmp}/ck")

    def resume(folder, n=2, extra=(), iterations="20"):
        return mpirun(n) + [args.poseidon, "train"] + base + ["--iterations", iterations] + list(extra) + [
            "--resume", folder]

    expect_failure(args, resume(f"{tmp}/ck", iterations="30"), "other settings")
    expect_failure(args, resume(f"{tmp}/ck", extra=["--lr", "0.5"]), "other settings")
    # Saved in server mode: the allreduce layers' momentum is sharded by owner, which gradient
    # mode (the optimizer on the workers, the mean gradient replicated) cannot resume.
    expect_failure(args, resume(f"{tmp}/ck", extra=["--optimizer", "adam"]), "sharded by owner")
    expect_failure(args, resume(f"{tmp}/ck", iterations="10"), "nothing left to do")
    expect_failure(args, resume(f"{tmp}/ck", n=3), "mpirun -np 2")
    fcnet = [a if a != "mlp" else "fcnet" for a in resume(f"{tmp}/ck")]
    expect_failure(args, fcnet, "other settings")
    expect_failure(args, resume(f"{tmp}/none"), "no such folder")
    os.makedirs(f"{tmp}/empty")
    expect_failure(args, resume(f"{tmp}/empty"), "no complete checkpoint")
    assert tree_digest(f"{tmp}/ck") == before, "a failed resume changed the checkpoint folder"
    # Damage: a flipped byte, a truncated file, a damaged manifest.
    for damage, phrase in [("flip", "does not match its manifest"), ("truncate", "does not match its manifest"),
                           ("manifest", "corrupt")]:
        shutil.copytree(f"{tmp}/ck", f"{tmp}/bad")
        target = f"{tmp}/bad/iter-00000010/" + ("MANIFEST" if damage == "manifest" else "rank-1.state")
        with open(target, "rb") as f:
            data = bytearray(f.read())
        if damage == "truncate":
            data = data[: len(data) // 2]
        else:
            data[len(data) // 3] ^= 0x01
        with open(target, "wb") as f:
            f.write(data)
        expect_failure(args, resume(f"{tmp}/bad"), phrase)
        shutil.rmtree(f"{tmp}/bad")
    # The intact checkpoint still resumes.
    train(args, 2, flags + ["--resume", f"{tmp}/ck"])
    # A 16-bit wire's checkpoint resumes on fp32: both step by owner (the wire is not kept).
    rc, out, err, secs = run(mpirun(2) + [args.poseidon, "train"] + flags + ["--wire", "bf16", "--checkpoint-dir",
                                                                             f"{tmp}/ck16", "--checkpoint-every", "10"],
                             300, env)
    assert rc != 0, "the bf16 run was meant to die at iteration 15"
    train(args, 2, flags + ["--resume", f"{tmp}/ck16"])
    expect_failure(args, mpirun(2) + [args.poseidon, "train"] + flags + ["--checkpoint-dir", f"{tmp}/x"],
                   "go together")


def test_disk_full_checkpoint(args):
    # The disk fills up while a checkpoint is written (a 16 MB tmpfs, filled after the first
    # checkpoint): a one-line error, and the previous checkpoint stays intact and resumable.
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    tmp = tempfile.mkdtemp()
    disk = f"{tmp}/disk"
    os.makedirs(disk)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", disk], check=True)
    try:
        common = ["--model", "mlp", "--no-eval", "--synthetic", "--seed", "3", "--checkpoint-dir", f"{disk}/ck",
                  "--checkpoint-every", "5", "--iterations", "10"]
        rc, out, err, secs = run(mpirun(2) + [args.poseidon, "train"] + common, 120,
                                 dict(ENV, POSEIDON_FAULT_EXIT="1:7"))
        assert rc != 0 and "dying at iteration 7" in err, f"the run was meant to die: rc {rc}\n{err[-1500:]}"
        before = tree_digest(f"{disk}/ck")
        fd = os.open(f"{disk}/filler", os.O_WRONLY | os.O_CREAT)  # every byte that is left
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        os.close(fd)
        rc, out, err, secs = run(mpirun(2) + [args.poseidon, "train"] + common + ["--resume", f"{disk}/ck"], 120)
        errors = [l for l in err.splitlines() if l.startswith("poseidon: error:")]
        print(f"disk full at the checkpoint of iteration 10: exit {rc}: {errors[0][:200] if errors else err[-300:]}")
        assert rc != 0, "a checkpoint that cannot be written must fail the run"
        assert errors and "checkpoint" in errors[0] and "No space left" in errors[0], err[-2000:]
        with open(f"{disk}/ck/LATEST") as f:
            assert f.read().strip() == "iter-00000005", "LATEST no longer names the checkpoint of iteration 5"
        assert tree_digest(f"{disk}/ck") == before, "the previous checkpoint changed"
        left = [n for n in os.listdir(f"{disk}/ck") if "iter-00000010" in n]
        assert not left, f"the failed save left {left} behind"
        os.remove(f"{disk}/filler")
        c, out = train(args, 2, common + ["--resume", f"{disk}/ck"])
        assert "resumed from" in out and "at iteration 5" in out, out[-1500:]
        print("with room again, the run resumed from iteration 5 and finished")
    finally:
        subprocess.run(["umount", disk])
        shutil.rmtree(tmp)
