"""End-to-end: bad input to `poseidon train` (data, models, flags, an existing output
file): a non-zero exit with one short `poseidon: error:` line naming the problem, and no
hang."""
import gzip
import os
import shutil

from e2e import mpirun, expect_failure


DATA = "/usr/share/datasets/fashion-mnist"


def test_bad_missing_data(args):
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--data", "/nonexistent/fmnist"], "not found")


def test_bad_corrupt_data(args, tmp):
    for name in os.listdir(DATA):
        shutil.copy(os.path.join(DATA, name), tmp)
    raw = gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")).read()
    with gzip.open(os.path.join(tmp, "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(raw[: len(raw) // 3])  # a valid gzip of a truncated IDX file
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--data", tmp], "truncated")


def test_bad_unknown_model(args):
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "resnet9000"], "unknown model")


def test_bad_model_file(args, tmp):
    path = os.path.join(tmp, "broken.net")
    with open(path, "w") as f:
        f.write("input 1 28 28\nclasses 10\nconv 8 3\nfc 10\n")
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model-file", path], "line 4")


def test_bad_batch(args):
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--batch", "0"], "--batch")


def test_bad_checkpoint_options(args):
    # Checked by the core for both front ends (checkCheckpointOptions), said as the CLI's flags.
    train = mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--checkpoint-every"]
    expect_failure(args, train + ["-1"], "--checkpoint-every -1: give 0")
    expect_failure(args, train + ["2"], "--checkpoint-every needs --checkpoint-dir")


def test_bad_shards(args):
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--shards", "3"], "--shards 3")


def test_bad_scheme(args):
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--scheme", "carrier-pigeon"],
                   "--scheme")


def test_bad_optimizer(args):
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--optimizer", "rmsprop"],
                   "--optimizer rmsprop")
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--buffers", "sometimes"],
                   "--buffers sometimes")


def test_bad_save_params_exists(args, tmp):
    path = os.path.join(tmp, "params.bin")
    with open(path, "wb") as f:
        f.write(b"earlier results")
    expect_failure(args, mpirun(2) + [args.poseidon, "train", "--model", "mlp", "--save-params", path],
                   "already exists")
    with open(path, "rb") as f:
        assert f.read() == b"earlier results", "the existing file was changed"


def test_bad_options_named_as_flags(args):
    # The core checks the options once and names them by member; the CLI says its flags.
    train = mpirun(2) + [args.poseidon, "train", "--model", "mlp"]
    expect_failure(args, train + ["--lr", "0"], "--lr 0: the learning rate must be positive")
    expect_failure(args, train + ["--staleness", "-1"], "--staleness -1: must not be negative")
    expect_failure(args, train + ["--staleness", "1", "--straggler-timeout", "1"],
                   "--staleness and --straggler-timeout are two answers to slow workers")
    expect_failure(args, train + ["--cost-model", "schedule", "--profile", "none.prof", "--no-wfbp"],
                   "does not work with --no-wfbp")
