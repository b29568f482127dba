#!/usr/bin/env python3
"""Issue 12's benchmark: the papers' models from torchvision on 4 ranks in the bandwidth lab,
side by side in each round: PyTorch DDP, DDP + fp16 hook, DDP + PowerSGD (rank 4), Poseidon
(scheme auto, server-side SGD) and the compute ceiling (4 plain processes, no
communication). Batch 32 per rank, synthetic data; the FC layers keep the papers' shapes
(torchvision pools to 6x6 / 7x7 before them whatever the input size). Needs root. Every
system runs with the same process settings (glibc malloc thresholds, OpenBLAS kernels) that
poseidon.init() makes for itself, so the comparison is like for like.

Per model and bandwidth: medians of --repeats rounds, each system's images/s, Poseidon over
DDP and over the best DDP variant, and Poseidon against its bound: the throughput of an
iteration that takes the larger of the compute-only time and Poseidon's bytes sent per
iteration (per rank, measured) over the link rate. With poseidon-bf16 among --systems, the
same for it (its own bytes, so its own bound). With compute-traffic16 (the compute loop
while a 16-bit sharded PS's bytes move beside it, perfectly overlapped: a reference ceiling
for a 16-bit wire), its ratio to the best DDP variant and poseidon-bf16's share of it; with
compute-traffic32 (the same with 32-bit bytes, as many as an exact scheme moves: the
ceiling of fp32 Poseidon, and of DDP), the same for poseidon.
Writes papers-models.{md,csv,png} into --out.
  sudo bench/papers/papers_models_vs_ddp.py --models alexnet,vgg19,resnet50,googlenet --bandwidths 1gbit,10gbit
The transformer decoders (bench/benchlib/language_models.py: llama-mini, untied embedding;
gpt2-mini, tied), batch 8 sequences x 128 Zipf-distributed tokens per rank, causal-LM loss;
their "images/s" are sequences/s:
  sudo bench/papers/papers_models_vs_ddp.py --models llama-mini,gpt2-mini --bandwidths 100mbit,1gbit \
      --iterations 5 --repeats 3 --systems ddp,ddp-fp16,ddp-powersgd,poseidon,poseidon-bf16,compute
On a GPU (--device cuda): every rank shares the host's GPU (each its own CUDA context, so the
GPU time-slices between them), images 224x224, and the files are papers-models-gpu.*:
  sudo bench/papers/papers_models_vs_ddp.py --device cuda --models vgg19,resnet50 --bandwidths 10gbit,25gbit
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: benchlib
from benchlib.env import (arguments, ENV, PYTHON, ROOT, command_line, like_poseidon, machine, script_name,  # noqa: E402
                          use_build_python)
from benchlib.jobs import bytes_per_s, torchvision_train  # noqa: E402
from benchlib.language_models import batch_of  # noqa: E402
from benchlib.lab import run_ranks  # noqa: E402
from benchlib.report import pyplot, write_csv  # noqa: E402
from benchlib.rounds import median  # noqa: E402

SYSTEMS = ("ddp", "ddp-fp16", "ddp-powersgd", "poseidon", "compute")
# Also measurable (--systems): Poseidon with SFB layers stepped on the host, not the GPU; Poseidon
# in server mode from the first step (against mode auto's move after it); Poseidon with its PS
# layers in 16 bits on the wire (issue 38); compute with a 16-bit sharded PS's bytes moving
# beside it (gloo all-to-alls), perfectly overlapped: a reference ceiling for a 16-bit wire;
# the same with 32-bit bytes, the ceiling of an exact scheme.
KNOWN = (SYSTEMS[:4] + ("poseidon-sfb-host", "poseidon-server", "poseidon-bf16", "poseidon-fp16") + SYSTEMS[4:]
         + ("compute-traffic16", "compute-traffic32"))


def main():
    ap = arguments(__doc__)
    ap.add_argument("--models", default="alexnet,vgg19,resnet50,googlenet")
    ap.add_argument("--bandwidths", default="1gbit,10gbit")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--job-timeout", type=float, default=3600,
                    help="seconds one system's run may take before it counts as failed")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/benchmarks"))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="cuda: every rank on the host's GPU, 224x224 images")
    ap.add_argument("--from-log", nargs="+", metavar="LOG",
                    help="measure nothing: write the md/csv/png from the tables in these saved outputs")
    ap.add_argument("--drop-bound", action="store_true",
                    help="with --from-log: leave the bound out (logs made before the bytes per iteration left out "
                    "the start-up broadcast, which made the bound read low)")
    a = ap.parse_args()
    like_poseidon()
    if a.from_log:
        rows, systems = rows_from_logs(a.from_log)
        for row in rows if a.drop_bound else []:
            for key in ("bound", "of_bound", "bytes_per_iter"):
                row.pop(key, None)
        write(a.out, rows, systems, a)
        return
    # The Python package of the same build as the binary (build/python beside build/apps).
    use_build_python(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.poseidon))), "python"))
    systems = a.systems.split(",")
    rows = []
    for model in a.models.split(","):
        for bw in a.bandwidths.split(","):
            rows.append(measure(a, model, bw, systems))
            print_row(rows[-1], systems)
    write(a.out, rows, systems, a)


def measure(a, model, bw, systems):
    seen = {s: [] for s in systems}
    sent = {}
    for r in range(a.repeats):
        # Every other round runs the systems in reverse: a drift of the host over a round
        # (a neighbour's load coming or going) then favours no system's place in the order.
        for i, system in (enumerate(systems) if r % 2 == 0 else reversed(list(enumerate(systems)))):
            flags = ["--device", a.device, "--port", str(29600 + 10 * r + i)]
            job = torchvision_train(system, model, a.iterations, flags, size=224 if a.device == "cuda" else None)
            try:
                j = run_ranks(a.poseidon, a.ranks, bw, job, timeout=a.job_timeout)
            except (SystemExit, subprocess.TimeoutExpired) as e:  # one system's failure is reported, the rest run
                print(f"{model} {bw} round {r + 1} {system:13s} FAILED: {e}", flush=True)
                continue
            seen[system].append(j["images_per_s"])
            if system in ("poseidon", "poseidon-bf16"):
                sent.setdefault(system, []).append(j["bytes_sent_per_iter"])
            mode = f" (mode {j['mode']})" if "mode" in j else ""
            print(f"{model} {bw} round {r + 1} {system:13s} {j['images_per_s']:.2f} images/s{mode}", flush=True)
    row = {"model": model, "link": bw, "rounds": a.repeats}
    seen = {s: v for s, v in seen.items() if v}  # a system that failed every round has no figure
    row.update({s: median(v) for s, v in seen.items()})
    row["paired"] = paired(seen)
    variants = [row[s] for s in VARIANTS if s in row]
    if "poseidon" in row and "ddp" in row:
        row["vs_ddp"] = row["poseidon"] / row["ddp"]
    for system, prefix in (("poseidon", ""), ("poseidon-bf16", "bf16_")):
        if system in row and variants:
            row[prefix + "vs_best_ddp"] = row[system] / max(variants)
        if "compute" in row and sent.get(system):
            row[prefix + "bytes_per_iter"] = median(sent[system])
            examples = a.ranks * batch_of(model)  # per iteration, all ranks
            compute_s = examples / row["compute"]
            row[prefix + "bound"] = examples / max(compute_s, row[prefix + "bytes_per_iter"] / bytes_per_s(bw))
            row[prefix + "of_bound"] = row[system] / row[prefix + "bound"]
    for bits, system, prefix in (("16", "poseidon-bf16", "bf16_"), ("32", "poseidon", "fp32_")):
        ceiling = "compute-traffic" + bits
        if ceiling in row and variants:
            row[f"traffic{bits}_vs_best_ddp"] = row[ceiling] / max(variants)
        if ceiling in row and system in row:
            row[f"{prefix}of_traffic{bits}"] = row[system] / row[ceiling]
    return row


# The columns after the systems' images/s: key and title; the bf16_ ones with poseidon-bf16,
# the trafficN ones with compute-trafficN (columns()).
TITLES = {"vs_ddp": "vs DDP", "vs_best_ddp": "vs best DDP", "bound": "bound", "of_bound": "of bound",
          "bf16_vs_best_ddp": "bf16 vs best DDP", "bf16_bound": "bf16 bound", "bf16_of_bound": "bf16 of bound",
          "traffic16_vs_best_ddp": "traffic16 vs best DDP", "bf16_of_traffic16": "bf16 of traffic16",
          "traffic32_vs_best_ddp": "traffic32 vs best DDP", "fp32_of_traffic32": "fp32 of traffic32"}
VARIANTS = ("ddp", "ddp-fp16", "ddp-powersgd")


def columns(systems):
    """The TITLES keys shown: a bf16_ key needs poseidon-bf16 among the systems, a trafficN key compute-trafficN."""
    def needs(key):
        traffic = [f"compute-traffic{n}" for n in ("16", "32") if f"traffic{n}" in key]
        return (["poseidon-bf16"] if key.startswith("bf16_") else []) + traffic
    return [k for k in TITLES if all(s in systems for s in needs(k))]


def titles(systems):
    return " | ".join(TITLES[k] for k in columns(systems))


def paired(seen):
    """Per round: Poseidon over DDP, and over the best DDP variant of that round ([] when
    a system is missing)."""
    rounds = min((len(v) for v in seen.values()), default=0)
    if "poseidon" not in seen or "ddp" not in seen:
        return []
    if any(len(v) != rounds for v in seen.values()):  # a failed run: the rounds no longer pair up
        return []
    out = []
    for r in range(rounds):
        best = max(seen[s][r] for s in VARIANTS if s in seen)
        out.append((seen["poseidon"][r] / seen["ddp"][r], seen["poseidon"][r] / best))
    return out


def cell(row, key):
    v = row.get(key)
    if v is None:
        return "-"
    if key.endswith("vs_ddp") or key.endswith("vs_best_ddp"):
        return f"{v:.2f}x"
    return f"{v:.0%}" if key.endswith("of_bound") or "_of_traffic" in key else f"{v:.2f}"


def rows_from_logs(paths):
    """The per-model tables this script printed ("| model | link | <systems> | vs DDP | ..."),
    back into rows, each with the number of rounds its log ran ("<model> <link> round N ...");
    a later log's row replaces an earlier one's for the same model and link, in its place. The systems
    are those of the tables, in this script's order."""
    rows, systems, rounds, seen = {}, [], {}, {}
    for path in paths:
        header = None
        with open(path) as f:
            for line in f:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                words = line.split()
                if len(words) > 3 and words[2] == "round" and words[3].isdigit():
                    key = (path, words[0], words[1])
                    rounds[key] = max(rounds.get(key, 0), int(words[3]))
                    seen.setdefault(key, {}).setdefault(words[4], []).append(float(words[5]))
                elif line.startswith("| model |"):
                    by_title = {t: k for k, t in TITLES.items()}
                    header = [c for c in cells[2:] if c not in by_title]
                    keys = [by_title[c] for c in cells[2:] if c in by_title]
                    systems += [s for s in header if s not in systems]
                elif line.startswith("| ") and header:
                    key = (path, cells[0], cells[1])
                    row = {"model": cells[0], "link": cells[1], "rounds": rounds.get(key),
                           "paired": paired(seen.get(key, {}))}
                    row.update({s: float(v) for s, v in zip(header, cells[2:]) if v != "-"})
                    for key, v in zip(keys, cells[2 + len(header):]):
                        if v != "-":
                            row[key] = float(v.rstrip("x%")) / (100 if v.endswith("%") else 1)
                    rows[(row["model"], row["link"])] = row  # in the place of the first
    order = [s for s in KNOWN if s in systems]
    return list(rows.values()), order


def gpu_note():
    """What the GPU rows are: the device, and why the figures look as they do."""
    name = subprocess.run([PYTHON, "-c", "import torch; print(torch.cuda.get_device_name(0))"], capture_output=True,
                          text=True).stdout.strip() or "GPU"
    return (f"Every rank on one {name}, each with its own CUDA context: the GPU time-slices between the ranks, so "
            "the compute-only column is four processes sharing it, and every system pays that sharing alike. DDP "
            "runs with gloo on CUDA tensors: NCCL refuses two ranks on one GPU. Each rank's link is capped by "
            "`poseidon lab` (tc tbf on a veth per rank).\n\n")


def print_row(row, systems):
    print("| model | link | " + " | ".join(systems) + f" | {titles(systems)} |")
    print(f"| {row['model']} | {row['link']} | " + " | ".join(cell(row, s) for s in systems + columns(systems))
          + " |", flush=True)


def write(out, rows, systems, a):
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, "papers-models" + ("-gpu" if getattr(a, "device", "cpu") == "cuda" else ""))
    keys = ["model", "link", "rounds"] + systems + ["bytes_per_iter"] + columns(systems)
    keys += ["bf16_bytes_per_iter"] if "poseidon-bf16" in systems else []
    write_csv(stem + ".csv", rows, keys)
    host = machine()
    with open(stem + ".md", "w") as f:
        gpu = getattr(a, "device", "cpu") == "cuda"
        f.write(f"# The papers' models, {a.ranks} ranks in the lab{' sharing one GPU' if gpu else ''} "
                f"({script_name()})\n\n")
        if gpu:
            f.write(gpu_note())
        if a.from_log:
            # The logs do not record their hosts or settings: only the rounds can be told.
            f.write(f"Rebuilt from {', '.join(os.path.basename(p) for p in a.from_log)}; each row from the last log "
                    "that has it, medians of its alternated rounds (column rounds); batch 32 per rank (the language models: 8 sequences of 128 tokens, their images/s are sequences/s); images/s of "
                    "all ranks. The hosts and settings are those of the logs' runs (docs/benchmarks/README.md "
                    f"says which), not this rebuild's ({host}).\n\n")
            if a.drop_bound:
                f.write("The bound is left out: these runs counted rank 0's start-up broadcast of the parameters "
                        "in its bytes per iteration, which made the bound read low.\n\n")
        else:
            f.write(f"{host}; batch 32 per rank (language models: 8 sequences), {a.iterations} iterations per run, medians of {a.repeats} "
                    f"alternated rounds; images/s of all ranks; malloc {ENV['MALLOC_MMAP_THRESHOLD_']}/"
                    f"{ENV['MALLOC_TRIM_THRESHOLD_']} and OpenBLAS {ENV.get('OPENBLAS_CORETYPE', 'as detected')} for "
                    "every system.\n\n")
        f.write(f"Made by: `{command_line()}`\n\n")
        f.write("| model | link | rounds | " + " | ".join(systems) + f" | {titles(systems)} |\n")
        f.write("|---" * (len(systems) + 3 + len(columns(systems))) + "|\n")
        for row in rows:
            f.write(f"| {row['model']} | {row['link']} | {row.get('rounds') or '-'} | "
                    + " | ".join(cell(row, s) for s in systems + columns(systems)) + " |\n")
        f.write("\nPer round, where a row has more than one (Poseidon over DDP in the same round; over the "
                "round's best DDP variant):\n\n")
        for row in rows:
            if len(row.get("paired") or []) > 1:
                f.write(f"- {row['model']} {row['link']}: " + ", ".join(f"{d:.2f}" for d, _ in row["paired"])
                        + "; " + ", ".join(f"{b:.2f}" for _, b in row["paired"]) + "\n")
    plot(stem + ".png", rows, systems, "rows from the runs of " + ", ".join(map(os.path.basename, a.from_log))
         if a.from_log else host)
    print(f"wrote {stem}.md, .csv and .png")


def plot(path, rows, systems, host):
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4))
    width = 0.8 / len(systems)
    for k, system in enumerate(systems):
        ax.bar([i + k * width for i in range(len(rows))], [r.get(system, float("nan")) for r in rows], width,
               label=system)
    for i, r in enumerate(rows):
        if "bound" in r:
            ax.hlines(r["bound"], i - width / 2, i + len(systems) * width - width / 2, colors="black",
                      linestyles="dashed", label="bound" if i == 0 else None)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
    ax.set_xticklabels([f"{r['model']}\n{r['link']}" for r in rows])
    ax.set_ylabel("images/s (4 ranks)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.suptitle(f"papers' models in the lab; bound: max(compute-only, bytes/link); {host}", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
