#!/usr/bin/env python3
"""Writes valid inputs for decode_fuzz (first byte: 0 message, 1 state file, 2 manifest),
so the fuzzer starts from the formats rather than from nothing. Usage: make_seeds.py DIR"""
import os
import struct
import sys
import zlib

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def seed(name, kind, body):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([kind]) + body)


payload = struct.pack("<4f", 1, 2, 3, 4)
for msg_type in (1, 2, 3, 4, 5):
    header = struct.pack("<IHHIIQQ", 0x4E445350, 1, msg_type, 7, 1, 3, len(payload))
    seed(f"message-{msg_type}", 0, header + payload)

records = [(b"a", b"\0" * 16), (b"params/b", b"\1" * 256), (b"c", b"xyz")]
meta = b"iteration 5"
body = b"PSDNSTAT" + struct.pack("<IIQ", 1, len(records), len(meta)) + meta
for name, data in records:
    body += struct.pack("<I", len(name)) + name + struct.pack("<Q", len(data)) + data
body += struct.pack("<I", zlib.crc32(body))
seed("state", 1, body)

text = b"poseidon-checkpoint 1\niteration 10\nranks 2\nconfig model x | batch=32\nfile 0 100 12345\nfile 1 100 678\n"
seed("manifest", 2, text + b"crc %d\n" % zlib.crc32(text))
