"""The Python package in one process (a job of one, no mpirun): the API, what the probe
finds, equality with a plain PyTorch loop, and clear errors for bad input."""

import pytest
import torch
import torch.nn.functional as F

import poseidon
from api_support import data, max_difference, runtime, small_net, train, train_zeroing_after_forward  # noqa: F401


def test_job_of_one():
    assert poseidon.is_initialized()
    assert (poseidon.rank(), poseidon.size(), poseidon.local_rank()) == (0, 1, 0)


@pytest.mark.parametrize("kind,mode,ends_in", [("sgd", "server", "server"), ("sgd", "gradient", "gradient"),
                                               ("adam", "auto", "gradient"), ("sgd", "auto", "server")])
def test_one_worker_equals_plain_pytorch(kind, mode, ends_in):
    reference, net = small_net(), small_net()
    make = {"sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
            "adam": lambda p: torch.optim.Adam(p, lr=1e-3)}[kind]
    train(reference, make(reference.parameters()), data())
    optimizer = make(net.parameters())
    model = poseidon.DistributedModel(net, optimizer, mode=mode)
    assert model.mode == ("server" if mode == "server" else "gradient")  # auto: the first iteration decides
    train(model, optimizer, data())
    assert model.mode == ends_in
    model.synchronize()
    model.close()
    assert max_difference(reference, small_net()) > 1e-3  # training moved the parameters
    assert max_difference(reference, net) < 1e-5


@pytest.mark.parametrize("mode", ["auto", "server"])
def test_zero_grad_after_the_forward_equals_plain_pytorch(mode):
    # Mode auto moves onto the servers in the second iteration's forward: the first
    # iteration's mean gradient must not stay in .grad for that backward to add to.
    reference, net = small_net(), small_net()
    make = lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)  # noqa: E731
    train_zeroing_after_forward(reference, make(reference.parameters()), data())
    optimizer = make(net.parameters())
    model = poseidon.DistributedModel(net, optimizer, mode=mode)
    train_zeroing_after_forward(model, optimizer, data())
    assert model.mode == "server"
    model.synchronize()
    model.close()
    assert max_difference(reference, net) < 1e-5


def test_probe_finds_waits_factors_and_rows():
    class Tokens(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(20, 8)
            self.proj = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 20)

        def forward(self, x):
            h = self.proj(self.embed(x))  # a Linear on [B, T, 8]: T factor rows per example
            return F.linear(h, self.embed.weight)  # tied: embed's weight used outside embed

    torch.manual_seed(0)
    net = Tokens()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    model = poseidon.DistributedModel(net, optimizer)
    x = torch.randint(0, 20, (4, 5))
    model(x).sum().backward()
    optimizer.step()
    found = {layer.name: layer for layer in model._layers}
    assert found["proj"].factorable and found["proj"].rows_per_example == 5 and found["proj"].self_waited
    assert not found["embed"].self_waited  # waited for before the forward instead
    assert not found["head"].self_waited and not found["head"].factorable  # never called
    assert [layer.name for layer in model._layers][:2] == ["embed", "proj"]
    model.close()


def test_probe_goes_the_safe_way_and_describe_says_so():
    """MultiheadAttention reads out_proj's tensors inside its own forward (out_proj's never
    runs): out_proj is waited for before the forward and never sent by factors. A Linear
    inside torch.utils.checkpoint runs its forward again in backward: no factors either.
    Training still equals plain PyTorch (one worker)."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
            self.inner = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x):
            h, _ = self.attn(x, x, x)
            h = torch.utils.checkpoint.checkpoint(lambda t: torch.relu(self.inner(t)), h, use_reentrant=False)
            return self.head(h.mean(dim=1))

    torch.manual_seed(0)
    net = Net()
    plain = __import__("copy").deepcopy(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    model = poseidon.DistributedModel(net, optimizer, scheme="sfb")
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(4, 5, 8, generator=g), torch.randint(0, 3, (4,), generator=g)) for _ in range(3)]
    train(model, optimizer, batches)
    found = {layer.name: layer for layer in model._layers}
    assert not found["attn.out_proj"].self_waited and not found["attn.out_proj"].factorable
    assert "did not run" in found["attn.out_proj"].why_not_factors
    assert found["attn"].self_waited
    assert not found["inner"].factorable and "checkpoint" in found["inner"].why_not_factors
    assert found["head"].factorable and found["head"].self_waited
    text = model.describe()
    assert "attn.out_proj" in text and "before the forward" in text and "checkpoint" in text, text
    model.synchronize()
    reference_optimizer = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9)
    train(plain, reference_optimizer, batches)
    assert max_difference(net, plain) < 1e-6
    model.close()


def test_bad_input_is_one_clear_error():
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="scheme='bogus'"):
        poseidon.DistributedModel(net, optimizer, scheme="bogus")
    with pytest.raises(ValueError, match="no trainable parameters"):
        poseidon.DistributedModel(torch.nn.ReLU(), optimizer)
    with pytest.raises(ValueError, match="mode='server'"):
        poseidon.DistributedModel(net, torch.optim.Adam(net.parameters()), mode="server")
    with pytest.raises(TypeError, match="optimizer"):
        poseidon.DistributedModel(net, None)
    with pytest.raises(ValueError, match="send_order=lifo"):
        poseidon.DistributedModel(net, optimizer, send_order="lifo")
    with pytest.raises(ValueError, match="max_bandwidth"):
        poseidon.DistributedModel(net, optimizer, max_bandwidth="fast")
    with pytest.raises(ValueError, match="stack_rate=fast: give a rate"):  # the core's parsing, said as a keyword
        poseidon.DistributedModel(net, optimizer, stack_rate="fast")
    with pytest.raises(ValueError, match="wire=int8: use fp32"):
        poseidon.DistributedModel(net, optimizer, wire="int8")
    with pytest.raises(ValueError, match="error_feedback=True keeps .* wire=fp32 rounds nothing: use wire=bf16"):
        poseidon.DistributedModel(net, optimizer, error_feedback=True)
    with pytest.raises(ValueError, match="under 1mbit"):
        poseidon.DistributedModel(net, optimizer, max_bandwidth=200)
    for bad in (0, "many", 1.5):
        with pytest.raises(ValueError, match=f"devices_per_node={bad}:"):
            poseidon.DistributedModel(net, optimizer, devices_per_node=bad)
    # The checkpoint options, checked by the core as for the CLI, said as keywords.
    with pytest.raises(ValueError, match="checkpoint_every=-1: give 0"):
        poseidon.DistributedModel(net, optimizer, checkpoint_every=-1)
    with pytest.raises(ValueError, match="checkpoint_every needs checkpoint_dir"):
        poseidon.DistributedModel(net, optimizer, checkpoint_every=2)
    with pytest.raises(TypeError, match="whole number"):
        poseidon.DistributedModel(net, optimizer, checkpoint_dir="/tmp/x", checkpoint_every=2.5)
    by_host = poseidon.DistributedModel(net, optimizer, devices_per_node="host")
    assert by_host.options.devices_per_node == 0
    by_host.close()
    budgeted = poseidon.DistributedModel(net, optimizer, send_order="fifo", max_bandwidth="200mbit", wire="bf16",
                                         error_feedback=True)
    assert budgeted.options.max_bandwidth == 25e6 and budgeted.options.send_order == "fifo"
    assert budgeted.options.wire == "bf16" and budgeted.options.error_feedback
    budgeted.close()
    # Allreduce layers carry error feedback's residuals too (refused before they did).
    fed = poseidon.DistributedModel(net, optimizer, wire="bf16", scheme="allreduce", error_feedback=True)
    assert fed.options.scheme == "allreduce" and fed.options.error_feedback
    fed.close()
    model = poseidon.DistributedModel(net, optimizer)
    with pytest.raises(ValueError, match="already wrapped"):
        poseidon.DistributedModel(net, optimizer)
    other = small_net()
    with pytest.raises(ValueError, match="close"):
        poseidon.DistributedModel(other, torch.optim.SGD(other.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match="before the model's first forward"):
        optimizer.step()
    x, y = data(1)[0]
    train(model, optimizer, data(1))  # mode auto: the first iteration steps on the worker
    F.cross_entropy(model(x), y).backward()
    assert model.mode == "server"
    optimizer.param_groups[0]["lr"] = 0.5
    with pytest.raises(ValueError, match="between this iteration.s forward and optimizer.step"):
        optimizer.step()
    model.close()
    # Closed: the optimizer is the user's again, and the module may be wrapped anew.
    optimizer.param_groups[0]["lr"] = 0.1
    poseidon.DistributedModel(net, optimizer).close()


def test_the_option_keywords_are_the_core_table():
    """One table for the CLI and Python: the keywords, their defaults and help come from it,
    each value goes through its parser, and a keyword no option has is Python's TypeError."""
    import inspect
    import numpy as np
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    table = {row["name"]: row for row in poseidon._C.option_table() if row["python"]}
    params = inspect.signature(poseidon.DistributedModel).parameters
    for name, row in table.items():
        assert params[name].default == row["default"] and getattr(poseidon._C.Options(), name) is not None, name
        assert name in poseidon.DistributedModel.__doc__, name
    assert params["wire"].default == "fp32" and params["timeout"].default == 120.0
    with pytest.raises(TypeError, match="unexpected keyword argument 'stalenes'; did you mean 'staleness'"):
        poseidon.DistributedModel(net, optimizer, stalenes=1)
    with pytest.raises(ValueError, match="staleness=1.5: give a whole number"):
        poseidon.DistributedModel(net, optimizer, staleness=1.5)
    with pytest.raises(ValueError, match="node_memory=maybe: use"):
        poseidon.DistributedModel(net, optimizer, node_memory="maybe")
    with pytest.raises(ValueError, match="fusion_bytes=False: give a whole number"):  # a bool is no number
        poseidon.DistributedModel(net, optimizer, fusion_bytes=False)
    with pytest.raises(ValueError, match="gemm_flops of 50 flop/s is under a megaflop"):
        poseidon.DistributedModel(net, optimizer, gemm_flops=50)
    model = poseidon.DistributedModel(net, optimizer, staleness=np.int64(2), timeout=7.5, gemm_flops="50G",
                                      fusion_bytes=4e6, send_window_bytes=0, node_memory=False, kvstore_comms=3,
                                      kvstore_outstanding=3)
    o = model.options
    assert (o.staleness, o.timeout.total_seconds(), o.gemm_flops, o.send_window_bytes) == (2, 7.5, 50e9, 0)
    assert (o.node_memory, o.kvstore_comms, model.mode) == (False, 3, "server")  # staleness: server-only
    assert o.fusion_bytes == 4000000
    model.close()


def test_float64_parameters_refused():
    net = small_net().double()
    model = poseidon.DistributedModel(net, torch.optim.SGD(net.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="float32"):
        model(torch.randn(2, 1, 8, 8, dtype=torch.float64))
    model.close()


def test_scheduler_and_clipping_in_gradient_mode():
    """A scheduler made after wrapping and clipping after synchronize_gradients(), as in a
    plain loop: one worker ends where plain PyTorch does."""
    def run(wrap):
        net = small_net()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        model = poseidon.DistributedModel(net, optimizer, mode="gradient") if wrap else net
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        for x, y in data():
            F.cross_entropy(model(x), y).backward()
            if wrap:
                model.synchronize_gradients()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
        if wrap:
            model.close()
        return net

    assert max_difference(run(False), run(True)) < 1e-5


def test_grad_scaler_skipping_steps_counts_them_as_a_plain_loop_does():
    """Autocast (bfloat16) and a GradScaler whose first scales overflow: the scaler skips
    those optimizer steps; the model still counts them, and one worker ends where the same
    plain loop does."""
    def run(wrap):
        net = small_net()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        model = poseidon.DistributedModel(net, optimizer, mode="gradient") if wrap else net
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127, growth_interval=1000)
        skipped = 0
        for x, y in data(n=10):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = 100 * F.cross_entropy(model(x), y)  # scaled by 2^127 its gradients overflow
            scaler.scale(loss).backward()
            if wrap:
                model.synchronize_gradients()
            before = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            skipped += scaler.get_scale() < before
            optimizer.zero_grad()
        if wrap:
            model.synchronize()
            assert model.iteration == 10
            model.close()
        return net, skipped

    (plain, plain_skipped), (wrapped, wrapped_skipped) = run(False), run(True)
    assert plain_skipped > 0 and plain_skipped == wrapped_skipped  # the overflowing scales were skipped
    assert max_difference(small_net(), plain) > 1e-3  # the steps after them trained
    assert max_difference(plain, wrapped) < 1e-5


def test_a_failed_forward_is_not_a_pass():
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    model = poseidon.DistributedModel(net, optimizer)
    x, y = data(1)[0]
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
    with pytest.raises(RuntimeError):
        model(torch.randn(2, 3, 8, 8))  # wrong channel count: the module raises
    F.cross_entropy(model(x), y).backward()  # and training goes on
    optimizer.step()
    model.close()


def test_server_mode_needs_the_optimizer_to_own_every_trainable_parameter():
    net = small_net()
    with pytest.raises(ValueError, match="freeze"):
        poseidon.DistributedModel(net, torch.optim.SGD(net[-1].parameters(), lr=0.1), mode="server")
    for p in net[:-1].parameters():
        p.requires_grad_(False)
    poseidon.DistributedModel(net, torch.optim.SGD(net[-1].parameters(), lr=0.1), mode="server").close()


def test_auto_stays_on_the_workers_for_a_loop_that_reads_grad():
    # clip_grad_norm_ in the first iteration: the mean is needed on the workers, for good.
    reference, net = small_net(), small_net()
    for model_net in (reference, net):
        opt = torch.optim.SGD(model_net.parameters(), lr=0.1, momentum=0.9)
        model = model_net if model_net is reference else poseidon.DistributedModel(net, opt)
        for x, y in data(3):
            F.cross_entropy(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model_net.parameters(), 0.1)
            opt.step()
            opt.zero_grad()
    assert model.mode == "gradient" and "clip_grad_norm_" in model.describe().splitlines()[0]
    model.close()
    assert max_difference(reference, net) < 1e-5


def test_auto_stays_on_the_workers_for_an_optimizer_of_some_parameters():
    # The servers would update every trainable parameter: the last layer is not the optimizer's.
    reference, net = small_net(), small_net()
    for model_net in (reference, net):
        opt = torch.optim.SGD(list(model_net.parameters())[:-2], lr=0.1, momentum=0.9)
        model = model_net if model_net is reference else poseidon.DistributedModel(net, opt)
        train(model, opt, data(3))
    assert model.mode == "gradient" and "not hold exactly" in model.describe()
    model.close()
    assert max_difference(reference, net) < 1e-5


def test_auto_on_the_servers_refuses_a_later_read_of_grad():
    net = small_net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    model = poseidon.DistributedModel(net, opt)
    train(model, opt, data(2))
    assert model.mode == "server" and "first iteration read no .grad" in model.describe()
    x, y = data(1)[0]
    F.cross_entropy(model(x), y).backward()
    with pytest.raises(ValueError, match=r"mode='gradient'.*reads it only at some steps"):
        print(net[0].weight.grad.norm())
    opt.step()
    net.zero_grad()  # zero_grad's own reads are not reads of the mean
    model.close()
    assert net[0].weight.grad is None  # closed: the user's module again, read freely


def test_clipping_in_server_mode_is_refused():
    # The servers take the gradients: clipping .grad would silently clip nothing.
    net = small_net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    model = poseidon.DistributedModel(net, opt, mode="server")
    assert model.mode == "server"
    x, y = data(1)[0]
    F.cross_entropy(model(x), y).backward()
    with pytest.raises(ValueError, match="mode='gradient'"):
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    with pytest.raises(ValueError, match="mode='gradient'"):
        torch.nn.utils.clip_grad_value_(net.parameters(), 1.0)
    opt.step()
    model.close()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)  # closed: the user's module again


def test_gradient_mode_backward_returns_with_the_mean_and_refuses_misuse():
    net = small_net()
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    model = poseidon.DistributedModel(net, opt)
    assert model.mode == "gradient"
    x, y = data(1)[0]
    x = x.clone().requires_grad_(True)
    out = model(x)
    # A gradient penalty's autograd.grad towards the input does not end the iteration.
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    loss = F.cross_entropy(out, y) + 0.1 * g.pow(2).sum()
    loss.backward(retain_graph=True)  # this one syncs: .grad holds the mean now
    norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1e9)
    assert torch.isfinite(norm) and norm > 0
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()
    opt.step()
    opt.zero_grad()
    # Two backward passes for one step, not declared: an error naming the option.
    F.cross_entropy(model(x.detach()), y).backward()
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        model(x.detach())
    opt.step()
    opt.zero_grad()
    model.close()


def test_a_timeout_that_names_no_worker_waits_the_grace_once(monkeypatch):
    # The Python side of CulpritTimeout::kIndirectWitnessGrace: in a job of more than one
    # rank, a timeout that names only silent shards (names_worker false) waits once before
    # the rank ends the job or says it leaves; one that names the stalled worker, or any
    # other error, ends at once. The job of one here stands in for a job of three.
    import poseidon.runtime as rt

    class JobOfThree:
        def size(self):
            return 3

    slept = []
    monkeypatch.setattr(rt._process, "runtime", JobOfThree())
    monkeypatch.setattr(rt.time, "sleep", slept.append)
    indirect = poseidon._C.CulpritTimeout("rank 0: the shards on ranks 1, 2 sent nothing for 5 s")
    indirect.names_worker = False
    rt.let_the_direct_witness_speak(indirect)
    rt.let_the_direct_witness_speak(indirect)  # the hook after close() in a finally: no second wait
    assert slept == [poseidon._C.INDIRECT_WITNESS_GRACE_S] and slept[0] == 3.0
    direct = poseidon._C.CulpritTimeout("rank 0: rank 1 sent no update for 5 s")
    assert direct.names_worker  # the class default, as the translator leaves most errors
    rt.let_the_direct_witness_speak(direct)
    rt.let_the_direct_witness_speak(ValueError("a user's error"))
    assert len(slept) == 1
