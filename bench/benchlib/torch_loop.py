"""The timed training loop of the rank-side scripts (bench/jobs/): PyTorch only, no Poseidon."""
import os
import statistics
import time


def rank_and_size():
    """This rank and the job's size, as mpirun (in or out of the lab) sets them."""
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", 0)), int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))


def timed_steps(model, optimizer, x, y, iterations):
    """Seconds of each of `iterations` training steps on one batch (cross-entropy, backward,
    optimizer step, zero_grad): the loop the rank scripts time. On a GPU each step's time
    ends when the GPU has finished it (a measurement's synchronisation, not the loop's)."""
    import torch
    import torch.nn.functional as F
    gpu = x.is_cuda
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        if gpu:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def warm_median(times):
    """The median step past the first two, which warm up allocators and communication
    buffers (as in `poseidon train`'s median), when there are enough steps to leave them."""
    return statistics.median(times[2:] if len(times) > 4 else times)
