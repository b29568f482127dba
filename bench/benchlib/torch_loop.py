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


def traced_step(model, optimizer, x, y, path):
    """One more training step (every rank runs it), recorded by torch.profiler where `path`
    is set: a Chrome trace of its CPU threads and GPU streams there, and the operators that
    took the most device time on stderr. The GPU's timeline of one iteration."""
    import sys
    import torch
    from torch.profiler import ProfilerActivity, profile
    if not path:
        timed_steps(model, optimizer, x, y, 1)
        return
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if x.is_cuda else [])
    with profile(activities=activities) as prof:
        timed_steps(model, optimizer, x, y, 1)
    prof.export_chrome_trace(path)
    key = "self_device_time_total" if x.is_cuda else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=15), file=sys.stderr, flush=True)


def warm_median(times):
    """The median step past the first two, which warm up allocators and communication
    buffers (as in `poseidon train`'s median), when there are enough steps to leave them."""
    return statistics.median(times[2:] if len(times) > 4 else times)
