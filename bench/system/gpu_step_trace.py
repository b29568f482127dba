#!/usr/bin/env python3
"""Reads the Chrome trace of one training step that bench/jobs/torchvision_train.py
--trace-out writes (torch.profiler, rank 0) and says where the step's time went: the
step's span, the Python thread's forward (its top-level operators, and how many of its
copies waited for the GPU: a cudaStreamSynchronize inside), when the GPU ran this rank's
kernels and copies, and the busiest threads. On a GPU shared by several ranks every wait
for the GPU waits for the other ranks' time slices too, so the number of waits matters
more than their size.

  bench/system/gpu_step_trace.py docs/benchmarks/gpu/trace-poseidon-resnet50.json.gz
"""
import argparse
import collections
import gzip
import json


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def top_level(events):
    """The events of one thread that no earlier event of it contains, in time order."""
    out, end = [], -1.0
    for e in sorted(events, key=lambda e: e["ts"]):
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e["dur"]
    return out


def inside(outer, events):
    return [e for e in events if e is not outer and outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    a = ap.parse_args()
    events = load(a.trace)
    t0 = min(e["ts"] for e in events)
    span = (max(e["ts"] + e["dur"] for e in events) - t0) / 1000
    threads = collections.defaultdict(list)
    for e in events:
        threads[(e.get("pid"), e.get("tid"))].append(e)
    gpu = [e for (pid, _), v in threads.items() if pid == 0 for e in v]  # the device's streams
    host = {k: v for k, v in threads.items() if isinstance(k[0], int) and k[0] > 0}
    main_key = next(k for k in host if k[0] == k[1])  # the Python thread: tid == pid
    main_events = host[main_key]
    print(f"step: {span:.1f} ms from the first event to the last")
    ops = top_level(main_events)
    forward = [e for e in ops if e["name"] != "cudaDeviceSynchronize"]
    by_name = collections.Counter()
    for e in forward:
        by_name[e["name"]] += e["dur"] / 1000
    print(f"Python thread: {len(forward)} top-level operators, {sum(by_name.values()):.1f} ms in them; the largest:")
    for name, ms in by_name.most_common(6):
        print(f"  {ms:8.1f} ms  {name}")
    copies = [e for e in forward if e["name"] == "aten::copy_"]
    waited = [c for c in copies if any(k["name"] == "cudaStreamSynchronize" for k in inside(c, main_events))]
    print(f"  copies: {len(copies)}, of which {len(waited)} waited for the GPU "
          f"({sum(c['dur'] for c in waited) / 1000:.1f} ms)")
    if gpu:
        kernels = [e for e in gpu if not e["name"].startswith("Memcpy") and not e["name"].startswith("Memset")]
        busy = sum(e["dur"] for e in gpu) / 1000
        first, last = (min(e["ts"] for e in kernels) - t0) / 1000, (max(e["ts"] + e["dur"] for e in kernels) - t0) / 1000
        print(f"GPU (this rank): {busy:.1f} ms of kernels and copies; kernels from {first:.1f} to {last:.1f} ms")
    print("busiest host threads (events, ms covered, first to last):")
    for key, v in sorted(host.items(), key=lambda kv: -sum(e["dur"] for e in top_level(kv[1])))[:4]:
        tl = top_level(v)
        print(f"  {str(key):22s} {len(v):5d} {sum(e['dur'] for e in tl) / 1000:8.1f} "
              f"{(tl[0]['ts'] - t0) / 1000:7.1f} to {(tl[-1]['ts'] + tl[-1]['dur'] - t0) / 1000:.1f}")


if __name__ == "__main__":
    main()
