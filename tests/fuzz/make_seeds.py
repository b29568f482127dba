#!/usr/bin/env python3
"""Writes valid inputs for each fuzz target into DIR/TARGET/, so that every fuzzer starts
from its format rather than from nothing. Usage: make_seeds.py DIR"""
import gzip
import os
import struct
import sys
import zlib

out = sys.argv[1]
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def seed(target, name, body):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(body)


def messages():
    payload = struct.pack("<4f", 1, 2, 3, 4)
    for msg_type in (1, 2, 3, 4, 5, 14):  # 14: kFactors16
        # Version 3, comm/message.h's: a seed of another version stops at the version check.
        header = struct.pack("<IHHIIQQ", 0x4E445350, 3, msg_type, 7, 1, 3, len(payload))
        seed("message_fuzz", f"type-{msg_type}", header + payload)


def state_file():
    records = [(b"a", b"\0" * 16), (b"params/b", b"\1" * 256), (b"c", b"xyz")]
    meta = b"iteration 5"
    body = b"PSDNSTAT" + struct.pack("<IIQ", 1, len(records), len(meta)) + meta
    for name, data in records:
        body += struct.pack("<I", len(name)) + name + struct.pack("<Q", len(data)) + data
    seed("state_file_fuzz", "state", body + struct.pack("<I", zlib.crc32(body)))


def manifest():
    text = (b"poseidon-checkpoint 1\niteration 10\nranks 2\nconfig model x | batch=32\n"
            b"file 0 100 12345\nfile 1 100 678\n")
    seed("manifest_fuzz", "manifest", text + b"crc %d\n" % zlib.crc32(text))


def control_replies():
    # Bytes 0-2: call, ranks - 2, expected count; then the root's reply (control_reply_fuzz.cc).
    strings = [b"schemes=ps,sfb", b"", b"ok 100 12345"]
    packed = b"".join(struct.pack("<Q", len(s)) for s in strings) + b"".join(strings)
    seed("control_reply_fuzz", "allgather", bytes([0, len(strings) - 2, 0]) + packed)
    sums = [struct.pack("<2d", 3, 4), struct.pack("<2d", 5, 6)]
    packed = b"".join(struct.pack("<Q", len(s)) for s in sums) + b"".join(sums)
    seed("control_reply_fuzz", "allreduce", bytes([1, 0, 1]) + packed)
    seed("control_reply_fuzz", "floats", bytes([2, 2, 3]) + struct.pack("<4f", 1, 2, 3, 4))
    seed("control_reply_fuzz", "broadcast", bytes([3, 0, 0]) + b"1.25e+08 3.5e+10")


def idx_pairs():
    # The first images of Fashion-MNIST's test split, header rewritten to their count;
    # made-up pixels of the same layout where the dataset is not installed.
    count = 2
    try:
        with gzip.open(os.path.join(FASHION_MNIST, "t10k-images-idx3-ubyte.gz")) as f:
            pixels = f.read(16 + count * 784)[16:]
        with gzip.open(os.path.join(FASHION_MNIST, "t10k-labels-idx1-ubyte.gz")) as f:
            labels = f.read(8 + count)[8:]
    except OSError:
        pixels, labels = bytes(i % 256 for i in range(count * 784)), bytes([9, 2])
    pairs = {
        "fashion-mnist": (struct.pack(">4I", 0x803, count, 28, 28) + pixels,
                          struct.pack(">2I", 0x801, count) + labels),
        "tiny": (struct.pack(">4I", 0x803, 3, 2, 2) + bytes(range(12)),
                 struct.pack(">2I", 0x801, 3) + bytes([0, 5, 9])),
    }
    for name, (images, labels) in pairs.items():
        # Bytes 0-1: the image file's length (idx_fuzz.cc); mtime 0 keeps gzip seeds stable.
        seed("idx_fuzz", name, struct.pack("<H", len(images)) + images + labels)
        gz_images, gz_labels = gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)
        seed("idx_fuzz", name + ".gz", struct.pack("<H", len(gz_images)) + gz_images + gz_labels)


def model_files():
    # The built-in models (model_spec.cc) and one using every other option.
    models = {
        "fcnet": "input 1 28 28\nclasses 10\nconv 32 3 pad=1\nrelu\nconv 64 3 pad=1\nrelu\npool 2\n"
                 "conv 128 3 pad=1\nrelu\npool 2\nflatten\nfc 4096\nrelu\nfc 4096\nrelu\nfc 10\nlr 0.05\n",
        "convnet": "input 1 28 28\nclasses 10\nconv 64 3 pad=1\nrelu\nconv 64 3 pad=1\nrelu\npool 2\n"
                   "conv 128 3 pad=1\nrelu\nconv 128 3 pad=1\nrelu\npool 2\nflatten\nfc 10\nlr 0.01\n",
        "mlp": "input 1 28 28\nclasses 10\nflatten\nfc 256\nrelu\nfc 128\nrelu\nfc 10\nlr 0.05\n",
        "options": "# a small net\ninput 3 32 32   # CIFAR-sized\nclasses 100\nconv 16 5 stride=2 pad=0\n"
                   "relu\npool 2\ndropout 0.25\nflatten\nfc 64\ndropout 0.5\nfc 100\n",
    }
    for name, text in models.items():
        seed("model_file_fuzz", name, text.encode())


def compute_profiles():
    # The times of a profile as profileText (src/profile/compute_profile.cc) writes them, for fcnet;
    # "shapes" below adds shape lines.
    text = "# poseidon compute profile: model fcnet, medians over the run of rank 0 of 1\nbatch 32\n"
    for layer, fwd, bwd in (("conv0", 0.41, 0.93), ("conv2", 2.5, 5.25), ("conv5", 1.75, 3.5),
                            ("fc9", 0.625, 1.25), ("fc11", 0.5, 1), ("fc13", 0.0125, 0.025)):
        text += f"layer {layer} forward_ms {fwd} backward_ms {bwd}\n"
    seed("compute_profile_fuzz", "fcnet", (text + "other forward_ms 0.8 backward_ms 0\ncpu iteration_ms 2.5\n").encode())
    seed("compute_profile_fuzz", "minimal", b"batch 1\nlayer fc0 forward_ms 0 backward_ms 1e-3\n")
    seed("compute_profile_fuzz", "shapes",
         b"batch 8\nlayer conv0 forward_ms 1 backward_ms 2\nlayer fc1 forward_ms 0.5 backward_ms 1\n"
         b"shape conv0 kind conv tensor weight 16x3x3x3 tensor bias 16\n"
         b"shape fc1 kind fc M 10 N 144 rows 1 factorable 1 tensor weight 10x144 tensor bias 10\n")


messages()
state_file()
manifest()
control_replies()
idx_pairs()
model_files()
compute_profiles()
