"""gloo's allreduce (PyTorch DDP's ring) on the link, the baseline of allreduce_patterns.cc:
MB/s per rank as 2 (P-1)/P of the buffer over the median seconds. Run it in the lab:

    sudo build/apps/poseidon lab --ranks 4 --bandwidth 100mbit -- .venv/bin/python bench/micro/gloo_allreduce.py
"""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floats", type=int, default=4 << 20)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://{os.environ['LAB_MASTER_ADDR']}:29513", rank=rank,
                            world_size=size)
    x = torch.randn(a.floats)
    times = []
    for _ in range(a.rounds):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(x)
        dist.barrier()
        times.append(time.perf_counter() - start)
    s = sorted(times)[len(times) // 2]
    if rank == 0:
        print(f"{size} ranks, {a.floats} floats, {a.rounds} rounds (medians)")
        print(f"{'gloo allreduce':20s} {s:7.3f} s  {2 * (size - 1) / size * a.floats * 4 / s / 1e6:6.2f} MB/s per rank")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
