"""Horovod's start-up helpers across real ranks (mpirun -np 3): broadcast_parameters,
broadcast_optimizer_state and broadcast_object give every rank root_rank's state, through
Poseidon's own transport (poseidon._C.Collectives); ranks that pass different tensors all
stop with the same error, none waits in a broadcast. Exits non-zero on any mismatch."""
import sys

import torch

import poseidon


def check(ok, what):
    if not ok:
        print(f"rank {poseidon.rank()}: FAIL {what}", flush=True)
        sys.exit(1)


def main():
    poseidon.init()
    rank, size = poseidon.rank(), poseidon.size()
    root = size - 1  # not rank 0: the root is really the caller's
    torch.manual_seed(100 + rank)  # every rank starts elsewhere
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    opt = torch.optim.Adam(net.parameters(), lr=0.01 * (rank + 1))
    net(torch.randn(2, 5)).sum().backward()
    opt.step()  # Adam state to broadcast

    poseidon.broadcast_parameters(net.state_dict(), root_rank=root)
    poseidon.broadcast_optimizer_state(opt, root_rank=root)
    digest = [float(p.detach().double().sum()) for p in net.state_dict().values()]
    state = [float(s["exp_avg"].double().sum()) for s in opt.state_dict()["state"].values()]
    theirs = poseidon.broadcast_object((digest, state, opt.param_groups[0]["lr"]), root_rank=root)
    check(theirs == (digest, state, opt.param_groups[0]["lr"]), "every rank holds root_rank's parameters and state")
    check(opt.param_groups[0]["lr"] == 0.01 * size, "the optimizer's hyper-parameters are root_rank's")

    # Pickled state over a control message's size (8 MB chunks): the length, then the chunks.
    blob = poseidon.broadcast_object(bytes([root]) * (20 << 20) if rank == root else None, root_rank=root)
    check(len(blob) == 20 << 20 and blob[:1] == bytes([root]) and blob[-1:] == bytes([root]), "a 20 MB object arrives whole")

    # A big tensor: more than one control message (8 MB chunks).
    big = torch.full((3 * (1 << 20),), float(rank))
    poseidon.broadcast_parameters([("big", big)], root_rank=0)
    check(bool((big == 0).all()), "a 12 MB tensor arrives whole")

    try:
        poseidon.broadcast_parameters([(f"w{rank}", torch.zeros(2))], root_rank=0)
        check(rank == 0 and size == 1, "different names are refused")
    except ValueError as e:
        check("different tensors" in str(e), f"a clear error: {e}")
    try:
        poseidon.broadcast_object(1, root_rank=size)
        check(False, "a root outside the job is refused")
    except Exception as e:  # noqa: BLE001
        check("root_rank" in str(e), f"a clear error: {e}")
    check_tensor_collectives(rank, size)
    if rank == 0:
        print(f"broadcast_collectives: {size} ranks ok", flush=True)


def check_tensor_collectives(rank, size):
    """Horovod's allreduce, allgather, broadcast and barrier on the user's tensors, beside an
    open DistributedModel that has trained a step."""
    net = torch.nn.Sequential(torch.nn.Linear(5, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    model = poseidon.DistributedModel(net, opt)
    model(torch.randn(4, 5)).sum().backward()
    opt.step()
    mine = torch.tensor([float(rank), 1.0, rank * 0.1])
    expected_sum = torch.zeros(3)
    for r in range(size):  # the ranks' tensors in rank order, as allreduce adds them
        expected_sum += torch.tensor([float(r), 1.0, r * 0.1])
    check(torch.equal(poseidon.allreduce(mine, op=poseidon.Sum), expected_sum), "allreduce Sum")
    check(torch.equal(poseidon.allreduce(mine), expected_sum / size), "allreduce Average (the default)")
    inplace = mine.clone()
    check(poseidon.allreduce_(inplace, op=poseidon.Sum) is inplace and torch.equal(inplace, expected_sum), "allreduce_")
    counts = poseidon.allreduce(torch.tensor(rank + 1), op=poseidon.Sum)
    check(counts.item() == size * (size + 1) // 2 and counts.dtype == torch.int64, "allreduce of an integer count")
    gathered = poseidon.allgather(torch.full((rank + 1, 2), float(rank)))
    check(gathered.shape == (size * (size + 1) // 2, 2) and gathered[-1, 0].item() == size - 1, "allgather")
    value = torch.full((2,), float(rank))
    check(torch.equal(poseidon.broadcast(value, root_rank=1 % size), torch.full((2,), float(1 % size))), "broadcast")
    check(torch.equal(poseidon.broadcast_(value, root_rank=0), torch.zeros(2)), "broadcast_")
    poseidon.barrier()
    for bad, what in ((lambda: poseidon.allreduce(torch.zeros(rank + 1)), "different shapes"),
                      (lambda: poseidon.allreduce(torch.tensor(1), op=poseidon.Average), "op=Average"),
                      (lambda: poseidon.allreduce(mine, op="max"), "op='max'")):
        try:
            bad()
            check(what == "different shapes" and size == 1, f"{what} is refused")
        except ValueError as e:
            check(what in str(e), f"a clear error: {e}")
    model.close()


if __name__ == "__main__":
    main()
