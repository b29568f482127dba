"""The programs the benchmarks run on each rank: `poseidon train` on a built-in model and
synthetic data, and a torchvision model through the Python package or PyTorch DDP
(bench/jobs/torchvision_train.py), at the papers' FC shapes."""
import os
import re

from benchlib.env import BENCH, PYTHON, script

CLI_MODELS = ("fcnet", "convnet", "mlp", "resnet")  # the models `poseidon train --model` has built in
# Input sizes of the torchvision models on the CPU: small enough for a 2-core host, large enough
# for each net's pooling (AlexNet 63, Inception-V3 75; torchvision pools to the papers' FC
# shapes before the classifier whatever the input size). Others: 32.
IMAGE_SIZES = {"alexnet": 63, "inception_v3": 75}


def image_size(model):
    return IMAGE_SIZES.get(model, 32)


def synthetic_train(poseidon, model, iterations, flags=()):
    """`poseidon train` of a built-in model on synthetic data, no evaluation, a JSON report."""
    return [poseidon, "train", "--model", model, "--synthetic", "--no-eval", "--json", "--iterations",
            str(iterations)] + list(flags)


def torchvision_train(system, model, iterations, flags=(), size=None):
    """One rank of bench/jobs/torchvision_train.py: `system` (poseidon, ddp, compute, ...)
    training torchvision's `model`, batch 32 per rank."""
    return [PYTHON, script("jobs/torchvision_train.py"), "--system", system, "--model", model, "--image-size",
            str(size or image_size(model)), "--iterations", str(iterations)] + list(flags)


def model_file(name):
    """bench/models/<name>.model: a net in Poseidon's model-file format, for systems other than the CLI."""
    path = os.path.join(BENCH, "models", name + ".model")
    if not os.path.exists(path):
        raise SystemExit(f"no model file {path}: add one in Poseidon's model-file format")
    return path


def bytes_per_s(rate):
    """A link rate as the lab takes it (1gbit, 200mbit) in bytes per second."""
    m = re.fullmatch(r"([0-9.]+)(gbit|mbit)", rate)
    if not m:
        raise SystemExit(f"write a rate as 1gbit or 200mbit, not {rate}")
    return float(m.group(1)) * (1e9 if m.group(2) == "gbit" else 1e6) / 8
