"""End-to-end: the devices level, nodes of several ranks (plan's figures, exactness
against the flat run, bad --devices-per-node)."""
import json

from e2e import mpirun, run, train, plan, within, expect_failure, compare_params


def test_plan_nodes(args):
    # The devices level: 2 nodes x 4 devices, K = 32 per device: a node exchanges as one
    # worker with K = 128 (P1 = P2 = 2). SFB: 2 K (P1 - 1)(M + N) = 2*128*1*8192; PS per
    # co-located node: 2 M N (P1 + P2 - 2) / P2 = 2*4096*4096.
    j = json.loads(plan(args, ["--layer", "4096x4096", "--nodes", "2", "--devices-per-node", "4", "--batch", "32",
                               "--json"]))
    l = j["layers"][0]
    assert j["nodes"] == 2 and j["devices_per_node"] == 4 and j["batch"] == 128, j
    assert l["sfb_floats"] == 2097152 and l["ps_floats"] == 33554432 and l["scheme"] == "sfb", l
    table = plan(args, ["--layer", "4096x4096", "--nodes", "2", "--devices-per-node", "4"])
    assert "2 nodes x 4 devices" in table and "K = 128 per node" in table, table
    rc, out, err, _ = run([args.poseidon, "plan", "--devices-per-node", "4"])
    assert rc != 0 and "--nodes" in err, err


def test_np4_nodes_equal_flat(args, tmp):
    # Exactness of the devices level: 2 nodes x 2 ranks (the leaders exchange the nodes'
    # sums and stacked factors) end where the flat run ends, to float rounding (the sums
    # are grouped by node), for each scheme and in gradient mode; host grouping (all four
    # ranks on this host: one node) too; and a node's ranks passing messages instead of
    # sharing memory. A small net of fcnet's shape (a conv layer by PS, two FC layers by
    # factors under sfb, so one iteration has both through the leaders): fcnet's 42 M
    # parameters made the 12 runs' start-up most of this test's time.
    net = f"{tmp}/nodes.net"
    with open(net, "w") as f:
        f.write("input 1 28 28\nclasses 10\nconv 16 3 pad=1\nrelu\npool 2\nflatten\nfc 256\nrelu\nfc 10\n")
    common = ["--model-file", net, "--iterations", "3", "--no-eval", "--json", "--seed", "3", "--lr", "0.01"]
    runs = [("ps", ["--scheme", "ps"], "2"), ("sfb", ["--scheme", "sfb"], "2"),
            ("adam", ["--optimizer", "adam"], "2"), ("host", ["--scheme", "ps"], "host"),
            ("messages", ["--scheme", "ps", "--intra-node", "messages"], "2"),
            ("allreduce", ["--scheme", "allreduce"], "2"),
            ("allreduce-adam", ["--scheme", "allreduce", "--optimizer", "adam"], "2")]
    for name, extra, nodes in runs:
        flat = f"{tmp}/{name}-flat.bin"
        if name not in ("host", "messages"):
            train(args, 4, common + extra + ["--save-params", flat])
        else:
            flat = f"{tmp}/ps-flat.bin"
        node_report, out = train(args, 4, common + extra + ["--devices-per-node", nodes,
                                                            "--save-params", f"{tmp}/{name}-nodes.bin"])
        # All four ranks on this host: a node's ranks share memory unless told not to.
        inside = "by messages" if name == "messages" else "by shared memory"
        assert f"inside a node {inside}" in out, f"{name}: expected 'inside a node {inside}' in:\n{out[-1500:]}"
        if name == "sfb":
            schemes = [l["scheme"] for l in node_report["layers"]]
            assert schemes == ["ps", "sfb", "sfb"], f"sfb: nodes of {nodes} planned {schemes}"
        # Adam divides by sqrt(v): where a gradient is near zero, a rounding difference in
        # the sum becomes a step difference of order lr (measured 4.4e-6 after 3 steps on
        # fcnet, the test's model until 2026-11-28).
        tol = 2e-5 if "adam" in name else 1e-6
        compare_params(f"{tmp}/{name}-nodes.bin", flat, tol, f"{name}: nodes of {nodes} vs flat")
        if name in ("ps", "sfb", "allreduce"):
            # Bytes per node over the network (pieces inside a node do not count) are the
            # cost model's node figure: K = the node's batch, P1 = the nodes.
            within(node_report["bytes_sent_per_iter"], node_report["bytes_model_per_iter"], 0.05,
                   f"{name}: nodes of {nodes}, bytes per node")


def test_np4_nodes_wire16(args, tmp):
    # The devices level on a 16-bit wire: a node's devices hand their factors and gradients
    # to the leader in fp32; the leader sends the node's stacked factors (SFB) or its
    # slices (allreduce) in 16 bits. Replicas agree every step (--verify 1), bytes per node
    # are the cost model's, and the run stays near the flat fp32 one.
    common = ["--model", "fcnet", "--iterations", "3", "--no-eval", "--json", "--seed", "3", "--lr", "0.01"]
    for scheme in ("sfb", "allreduce"):
        train(args, 4, common + ["--scheme", scheme, "--save-params", f"{tmp}/{scheme}-flat.bin"])
        r, _ = train(args, 4, common + ["--scheme", scheme, "--wire", "bf16", "--devices-per-node", "2", "--verify", "1",
                                        "--save-params", f"{tmp}/{scheme}-bf16.bin"])
        within(r["bytes_sent_per_iter"], r["bytes_model_per_iter"], 0.05, f"{scheme} bf16: nodes of 2, bytes per node")
        compare_params(f"{tmp}/{scheme}-bf16.bin", f"{tmp}/{scheme}-flat.bin", 1e-2, f"{scheme}: bf16 nodes vs fp32 flat")


def test_bad_devices_per_node(args):
    expect_failure(args, mpirun(4) + [args.poseidon, "train", "--model", "mlp", "--synthetic", "--iterations", "2",
                                      "--devices-per-node", "3"], "split into nodes")
    expect_failure(args, mpirun(4) + [args.poseidon, "train", "--model", "mlp", "--synthetic", "--iterations", "2",
                                      "--devices-per-node", "2", "--scheme", "factor-push"], "--scheme factor-push")
    expect_failure(args, [args.poseidon, "train", "--model", "mlp", "--synthetic", "--iterations", "2",
                          "--devices-per-node", "two"], "--devices-per-node")
