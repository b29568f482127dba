"""The Python package in one process, what it saves and reads back: profiles for the
simulator, checkpoints and the run configuration they record, resuming in the saved mode."""

import json
import os
import subprocess

import pytest
import torch

import poseidon
from api_support import data, runtime, small_net, train  # noqa: F401


def test_write_profile_describes_the_model_for_the_simulator(tmp_path):
    """A profile of a Python model carries its layers' times and shapes, so that `poseidon
    simulate --profile` can run it without a model file."""
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    model = poseidon.DistributedModel(net, optimizer, timeline=True)
    train(model, optimizer, data())
    path = tmp_path / "small.prof"
    model.write_profile(path)
    model.close()
    lines = path.read_text().splitlines()
    assert "batch 8" in lines
    layers = [l.split() for l in lines if l.startswith("layer ")]
    shapes = [l.split() for l in lines if l.startswith("shape ")]
    assert [l[1] for l in layers] == [s[1] for s in shapes] == ["0", "1", "4", "6"]
    assert all(float(l[3]) > 0 and float(l[5]) > 0 for l in layers), lines  # forward_ms, backward_ms
    cpu = [l.split() for l in lines if l.startswith("cpu ")]
    assert len(cpu) == 1 and cpu[0][1] == "iteration_ms" and float(cpu[0][2]) > 0, lines
    assert shapes[2][2:] == ["kind", "fc", "M", "16", "N", "144", "rows", "1", "factorable", "1",
                             "tensor", "weight", "16x144", "tensor", "bias", "16"]
    binary = os.environ.get("POSEIDON_BIN")
    if not binary:
        pytest.skip("POSEIDON_BIN (the poseidon binary) not set: the simulator part cannot run")
    out = subprocess.run([binary, "simulate", "--profile", str(path), "--nodes", "2", "--bandwidth", "1gbit",
                          "--gemm-rate", "10G", "--system", "poseidon", "--json", "--host-cores", "1",
                          "--nodes-per-host", "2", "--stack-rate", "1000MB"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout.strip().splitlines()[-1])["runs"][0]
    assert [l["name"] for l in run["layers"]] == ["0", "1", "4", "6"]
    assert run["images_per_s"] > 0
    # Two nodes' compute threads on one core: at least twice the profile's CPU time.
    assert run["cpu_bound_s"] >= 2 * float(cpu[0][2]) / 1e3 * 0.999
    assert run["iteration_s"] == max(run["schedule_s"], run["cpu_bound_s"])


def test_bad_options_are_named_as_keywords():
    """The core checks the options (one check for the CLI and Python) and names each as the
    keyword a Python user passed, never as a CLI flag."""
    net = small_net()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    for options, says in [(dict(staleness=-1), "staleness=-1: must not be negative"),
                          (dict(backward_passes_per_step=0), "backward_passes_per_step=0: must be at least 1"),
                          (dict(buffers="sometimes"), "buffers=sometimes: use broadcast or average"),
                          (dict(cost_model="vibes"), "cost_model=vibes: use bytes, time or schedule"),
                          (dict(staleness=1, straggler_timeout=1.0), "staleness and straggler_timeout are two"),
                          (dict(straggler_timeout=5.0, timeout=2.0), "straggler_timeout must be shorter than timeout"),
                          (dict(kvstore="ring"), "kvstore=ring: use funnel, concurrent or chained")]:
        with pytest.raises(ValueError) as error:
            poseidon.DistributedModel(net, sgd, **options)
        assert says in str(error.value) and "--" not in str(error.value), str(error.value)
    with pytest.raises(ValueError, match="the optimizer's lr=0: the learning rate must be positive"):
        poseidon.DistributedModel(net, torch.optim.SGD(net.parameters(), lr=0.0))
    with pytest.raises(ValueError, match=r"^mode='gradient' \(a local optimizer such as Adam\).*drop staleness"):
        poseidon.DistributedModel(net, torch.optim.Adam(net.parameters()), staleness=2)


# The C++ core's run configuration of the default options (tests/unit/options_test.cc expects the same).
DEFAULT_RESUME = ("config/2 lr=0.01 momentum=0.9 wd=0 lr_decay=0 gradient_mode=0 batch=32 passes=1 buffers=broadcast "
                  "staleness=0 server_ranks=0 shards=0 pair=2097152 fusion=2097152"
                  # server mode: the allreduce layers step by owner, their momentum sharded
                  " allreduce_momentum=sharded")


def test_checkpoints_record_the_cores_run_configuration(tmp_path):
    """One function makes the run-configuration string: Python's checkpoints hold the same
    one as `poseidon train`'s, with the model, the plan and the optimizer after it."""
    assert poseidon._C.run_configuration(poseidon._C.Options(), True) == DEFAULT_RESUME
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    model = poseidon.DistributedModel(net, optimizer, checkpoint_dir=str(tmp_path / "ck"), checkpoint_every=2)
    train(model, optimizer, data(n=2))
    model.close()
    info = poseidon._C.latest_checkpoint(str(tmp_path / "ck"), 1)
    assert info.config.startswith(poseidon._C.run_configuration(model.options, True) + " | "), info.config
    assert info.config.endswith("python optimizer=SGD"), info.config
    # A resume with another setting the arithmetic depends on is refused, naming both.
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.5)
    resumed = poseidon.DistributedModel(net, optimizer, checkpoint_dir=str(tmp_path / "ck"), resume=True)
    with pytest.raises(ValueError, match=r"other settings.*momentum=0.9.*momentum=0.5"):
        train(resumed, optimizer, data(n=1))
    resumed.close()


def test_auto_resumes_in_the_mode_it_saved(tmp_path):
    """mode auto decides before it saves (here at close(), right after the first step), so a
    resumed run starts where the saved one went on, on the servers, and ends bit-equal to a run
    straight through (the workers' SGD and the servers' round differently)."""
    batches = data(n=5)

    def run(folder, last, **kwargs):
        net = small_net()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        model = poseidon.DistributedModel(net, optimizer, checkpoint_dir=str(tmp_path / folder), **kwargs)
        first_mode = model.mode
        train(model, optimizer, batches[model.start_iteration:last])
        model.synchronize()
        out = (model.digest(), first_mode, model.mode)
        model.close()
        return out

    straight = run("none", 5)
    assert straight[1:] == ("gradient", "server")
    run("at1", 1, checkpoint_every=1)
    assert run("at1", 5, resume=True) == (straight[0], "server", "server")
    run("at3", 3, checkpoint_every=3)
    assert run("at3", 5, resume=True) == (straight[0], "server", "server")


def test_schedule_rule_takes_a_profile_of_the_same_model(tmp_path):
    """cost_model="schedule" plans from a profile of this model (a job of one has nothing to
    choose: every layer stays on PS; the choice among schemes is tested under mpirun by
    mpi.np2_schedule_rule, tests/mpi/test_plan.py). Bad input is one clear error."""
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    model = poseidon.DistributedModel(net, optimizer, timeline=True)
    train(model, optimizer, data(n=3))
    path = tmp_path / "small.prof"
    model.write_profile(path)
    model.close()
    rates = dict(bandwidth=125e6, gemm_flops=10e9)
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    model = poseidon.DistributedModel(net, optimizer, cost_model="schedule", profile=str(path), stack_rate="500MB",
                                      **rates)
    train(model, optimizer, data(n=2))
    assert [l["scheme"] for l in model.plan()] == ["ps"] * 4
    model.close()
    def wrap(**options):
        fresh = small_net()
        return poseidon.DistributedModel(fresh, torch.optim.SGD(fresh.parameters(), lr=0.05), **options)

    with pytest.raises(ValueError, match="profile=FILE"):
        wrap(cost_model="schedule", **rates)
    with pytest.raises(ValueError, match="add it, or drop them"):
        wrap(profile=str(path))
    with pytest.raises(ValueError, match="scheme"):
        wrap(cost_model="schedule", profile=str(path), scheme="ps")
    with pytest.raises(Exception, match="cannot read the profile"):
        wrap(cost_model="schedule", profile=str(tmp_path / "none.prof"))
    # What the rule does not simulate (SSP here) fails at once, named as the keyword.
    with pytest.raises(ValueError, match="does not work with staleness$"):
        wrap(cost_model="schedule", profile=str(path), staleness=1, **rates)
    # A profile of another model: its first forward fails naming the mismatch.
    other = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(other.parameters(), lr=0.05)
    model = poseidon.DistributedModel(other, optimizer, cost_model="schedule", profile=str(path), **rates)
    with pytest.raises(Exception, match="written for another model"):
        train(model, optimizer, data(n=1))
    model.close()


def test_write_profile_needs_the_timeline(tmp_path):
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    model = poseidon.DistributedModel(net, optimizer)
    train(model, optimizer, data(n=1))
    with pytest.raises(Exception, match="timeline=True"):
        model.write_profile(tmp_path / "none.prof")
    model.close()
    assert not (tmp_path / "none.prof").exists()


def test_write_timeline_is_the_clis_chrome_trace(tmp_path):
    """write_timeline() writes every rank's spans as the CLI's --timeline does: a Chrome trace
    with each layer's forward and backward; without timeline=True it refuses and writes nothing."""
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    model = poseidon.DistributedModel(net, optimizer, timeline=True)
    train(model, optimizer, data(n=3))
    model.write_timeline(tmp_path / "trace.json")
    model.close()
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["otherData"]["ranks"] == 1 and trace["otherData"]["model"] == "Sequential"
    spans = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert {"forward 4", "backward 4"} <= spans, sorted(spans)[:20]
    other = small_net()
    plain = poseidon.DistributedModel(other, torch.optim.SGD(other.parameters(), lr=0.05))
    train(plain, plain.optimizer, data(n=1))
    with pytest.raises(Exception, match="timeline=True"):
        plain.write_timeline(tmp_path / "none.json")
    plain.close()
    assert not (tmp_path / "none.json").exists()


def test_checkpoint_keeps_plain_state_only(tmp_path):
    """A checkpoint object whose state_dict() holds a function (not readable back with
    torch.load(weights_only=True)) is refused by name when saving, and nothing is written."""
    class Holder:
        def state_dict(self):
            return {"schedule": lambda step: 0.5 ** step}

        def load_state_dict(self, state):
            pass

    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    model = poseidon.DistributedModel(net, optimizer, checkpoint_dir=str(tmp_path / "ck"),
                                      checkpoint_objects=[Holder()])
    train(model, optimizer, data(1))
    with pytest.raises(ValueError, match=r"holds a function at state\['objects'\]\[0\]\['schedule'\]"):
        model.save_checkpoint()
    assert not (tmp_path / "ck" / "LATEST").exists()
    model.close()
