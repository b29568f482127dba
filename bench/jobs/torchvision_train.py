#!/usr/bin/env python3
"""One system training a torchvision model for --iterations on synthetic data (batch per
rank --batch), or a transformer decoder (llama-mini, gpt2-mini: benchlib/language_models.py)
on Zipf-distributed token batches of --batch sequences of --seq tokens with the causal-LM
loss, one process per rank under mpirun (in or out of `poseidon lab`); rank 0
prints a JSON line with s_per_iter_median and images_per_s. The side of
bench/papers/papers_models_vs_ddp.py (and of the other lab benchmarks of torchvision models)
that runs inside each job. Systems:
  ddp           DistributedDataParallel, gloo
  ddp-fp16      DDP with the fp16 compression hook
  ddp-powersgd  DDP with PowerSGD (rank 4; one bucket, which gloo needs for it)
  poseidon      poseidon.DistributedModel, scheme --scheme (server-side SGD)
  poseidon-server  the same in server mode from the first step (poseidon: mode auto, which
                runs the first step in gradient mode and then moves onto the servers)
  poseidon-fifo the same with the bandwidth manager's FIFO order instead of priority
  poseidon-sfb-host  the same with SFB layers stepped on the host mirrors, not on the GPU
                (POSEIDON_SFB_UPDATE=host: the weight goes back to the GPU each iteration)
  poseidon-bf16, poseidon-fp16  the same with wire="bf16" / "fp16": the parameter server's
                layers in 16 bits on the wire (issue 38)
  compute       no communication at all: the compute ceiling
  compute-traffic16  compute, while gloo moves a 16-bit sharded PS's bytes beside it: two
                all-to-alls (push, pull) of a 16-bit buffer of every parameter each
                iteration, waited for only at the next iteration's start. No sums, no
                conversions, perfect overlap: a reference ceiling for a system that
                moves a 16-bit wire's bytes (DDP + fp16 hook moves as many) over TCP here
  compute-traffic32  the same with a 32-bit buffer: the ceiling of an exact scheme, which
                moves as many bytes as a ring allreduce (DDP, Poseidon's fp32 wire)
--device cuda: each rank on the GPU of its local rank among the visible ones (several ranks
share one GPU, each with its own CUDA context); DDP with gloo on CUDA tensors (NCCL refuses
two ranks on one GPU).
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torchvision

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import arguments  # noqa: E402
from benchlib.language_models import LANGUAGE_MODELS, build_language_model, zipf_batch  # noqa: E402
from benchlib.torch_loop import rank_and_size, timed_steps, traced_step, warm_median  # noqa: E402

SYSTEMS = ("ddp", "ddp-fp16", "ddp-powersgd", "poseidon", "poseidon-server", "poseidon-fifo", "poseidon-sfb-host",
           "poseidon-bf16", "poseidon-fp16", "compute", "compute-traffic16", "compute-traffic32")
TRAFFIC = {"compute-traffic16": torch.float16, "compute-traffic32": torch.float32}


def build(name):
    if name in LANGUAGE_MODELS:
        return build_language_model(name)
    kwargs = {"num_classes": 1000}  # the papers' FC shapes (AlexNet 9216-4096-4096-1000, VGG 25088-...)
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=False)
    return getattr(torchvision.models, name)(**kwargs)


class Traffic(torch.nn.Module):
    """The compute-traffic16/32 systems: `net`, with a 16/32-bit sharded PS's traffic of all its
    parameters (every rank sends each other rank that rank's shard of its gradients, then
    receives that rank's shard of the update) in flight from each iteration's start to the
    next's. No gradient feeds it and nothing waits for it sooner, so it measures what moving
    the bytes costs the host (kernel and gloo CPU, the link) and nothing of any schedule."""

    def __init__(self, net, size, dtype):
        super().__init__()
        self.net = net
        n = sum(p.numel() for p in net.parameters())
        self.send = torch.zeros(-(-n // size) * size, dtype=dtype)  # split evenly across the ranks
        self.received = [torch.empty_like(self.send) for _ in range(2)]  # the pushes, then the pulls
        self.work = []

    def forward(self, x):
        self.finish()
        self.work = [dist.all_to_all_single(into, self.send, async_op=True) for into in self.received]
        return self.net(x)

    def finish(self):
        for w in self.work:
            w.wait()
        self.work = []

    def bytes_sent(self, size):
        """Per rank and iteration: (size - 1) / size of the buffer, twice."""
        return 2 * (size - 1) / size * self.send.numel() * self.send.element_size()


def wrap(system, net, optimizer, a):
    """The model to call, and the step that ends an iteration."""
    rank, size = rank_and_size()
    if system == "compute":
        return net
    if system.startswith("poseidon"):
        if system == "poseidon-sfb-host":
            os.environ["POSEIDON_SFB_UPDATE"] = "host"
        import poseidon
        poseidon.init()
        nodes = a.devices_per_node if a.devices_per_node == "host" else int(a.devices_per_node)
        # Experiments' knobs: the allreduce layers' fusion buffer (BENCH_FUSION_BYTES) and
        # KVStore design (BENCH_KVSTORE: funnel, concurrent or chained).
        fusion = {"fusion_bytes": int(os.environ["BENCH_FUSION_BYTES"])} if os.environ.get("BENCH_FUSION_BYTES") else {}
        if os.environ.get("BENCH_KVSTORE"):
            fusion["kvstore"] = os.environ["BENCH_KVSTORE"]
        return poseidon.DistributedModel(net, optimizer, scheme=a.scheme, devices_per_node=nodes, **fusion,
                                         send_order="fifo" if system == "poseidon-fifo" else "priority",
                                         wfbp=not a.no_wfbp, timeline=bool(a.profile_out or a.timeline_out),
                                         mode="server" if system == "poseidon-server" else a.mode,
                                         wire=system[len("poseidon-"):] if system in ("poseidon-bf16", "poseidon-fp16")
                                         else "fp32")
    addr = os.environ.get("LAB_MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{a.port}", rank=rank, world_size=size)
    if system == "ddp-powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
        ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=1 << 16)
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=4, start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
        return ddp
    if system in TRAFFIC:
        return Traffic(net, size, TRAFFIC[system])
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    if system == "ddp-fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return ddp


def main():
    ap = arguments(__doc__, poseidon=False)
    ap.add_argument("--system", required=True, choices=SYSTEMS)
    ap.add_argument("--model", required=True)
    ap.add_argument("--image-size", type=int, required=True)
    ap.add_argument("--batch", type=int, default=None, help="examples per rank (32 images, 8 sequences)")
    ap.add_argument("--seq", type=int, default=128, help="language models: tokens per sequence")
    ap.add_argument("--iterations", type=int, default=10, help="timed steps (at least 2)")
    ap.add_argument("--scheme", default="auto")
    ap.add_argument("--port", type=int, default=29533)
    ap.add_argument("--devices-per-node", default="1", help="poseidon: ranks per node (1: flat) or host")
    ap.add_argument("--mode", default="auto", choices=("auto", "server", "gradient"), help="poseidon: where the optimizer runs")
    ap.add_argument("--no-wfbp", action="store_true", help="poseidon: every sync after the whole backward")
    ap.add_argument("--profile-out", help="poseidon: rank 0 writes a compute profile here (poseidon simulate --profile)")
    ap.add_argument("--timeline-out", help="poseidon: rank 0 writes the Chrome trace of Poseidon's own work (every "
                    "rank's per-layer forward, backward, sends, receives and applies) here")
    ap.add_argument("--trace-out", help="after the timed steps, rank 0 records one more step with torch.profiler "
                    "and writes its Chrome trace (CPU threads and GPU streams) here")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = ap.parse_args()
    language = a.model in LANGUAGE_MODELS
    a.batch = a.batch or (8 if language else 32)
    if a.iterations < 2:
        ap.error("--iterations: at least 2")
    if (a.profile_out or a.timeline_out) and not a.system.startswith("poseidon"):
        ap.error("--profile-out and --timeline-out are for the poseidon systems (they come from poseidon's timeline)")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    device = torch.device("cpu")
    if a.device == "cuda":
        local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", 0))
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    net = build(a.model).to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    model = wrap(a.system, net, optimizer, a)
    rank, size = rank_and_size()
    g = torch.Generator().manual_seed(rank)
    if language:
        x, y = (t.to(device) for t in zipf_batch(a.batch, a.seq, net.vocab, g))
    else:
        x = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=g).to(device)
        y = torch.randint(0, 1000, (a.batch,), generator=g).to(device)
    # Bytes per iteration from the steps past the first two: the start-up broadcast of
    # rank 0's parameters is not an iteration's traffic (it made 8-iteration runs read 25-40% high).
    poseidon_run = a.system.startswith("poseidon")
    warm = min(2, a.iterations - 1)
    times = timed_steps(model, optimizer, x, y, warm)
    if poseidon_run:
        model.synchronize()
        sent0 = model.bytes_sent()
    times += timed_steps(model, optimizer, x, y, a.iterations - warm)
    sent = 0.0
    if poseidon_run:
        model.synchronize()
        sent = (model.bytes_sent() - sent0) / (a.iterations - warm)
    if a.trace_out:
        traced_step(model, optimizer, x, y, a.trace_out if rank == 0 else None)
        if poseidon_run:
            model.synchronize()
    if a.system in TRAFFIC:
        model.finish()
        sent = model.bytes_sent(size)
    mode = None
    if poseidon_run:
        mode = model.mode  # auto decides after the first iteration: say what it chose
        if a.profile_out:
            model.write_profile(a.profile_out)
        if a.timeline_out:
            model.write_timeline(a.timeline_out)
        model.close()
    s = warm_median(times)
    if rank == 0:
        print(json.dumps({"system": a.system, "model": a.model, "s_per_iter_median": s,
                          "images_per_s": a.batch * size / s, "bytes_sent_per_iter": sent,
                          "parameters": sum(p.numel() for p in net.parameters()),
                          **({"mode": mode} if mode else {})}), flush=True)
    if dist.is_initialized():
        # Left to the interpreter's shutdown, gloo's process group aborted some runs after
        # their result ("terminate called without an active exception").
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
