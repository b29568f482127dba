#!/usr/bin/env python3
"""The host's network stack rate between two lab ranks: rank 1 sends --megabytes over TCP to
rank 0 across the lab's veth links (MTU 1500, the bridge), rank 0 prints bytes/s. Run by
bench/simulator/simulator_vs_lab.py inside `poseidon lab --ranks 2` on a link far faster than the
stack, so that the CPU, not tc, sets the rate."""
import argparse
import os
import socket
import time

PORT = 47011


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("megabytes", type=int, nargs="?", default=1024, help="what rank 1 sends")
    total = ap.parse_args().megabytes << 20
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    peer0 = os.environ["LAB_MASTER_ADDR"]  # rank 0's address in the lab
    buf = memoryview(bytearray(4 << 20))
    if rank == 0:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((peer0, PORT))
        srv.listen(1)
        conn, _ = srv.accept()
        got, start = 0, time.perf_counter()
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            got += n
        print(f'{{"stack_bytes_per_s": {got / (time.perf_counter() - start):.0f}}}', flush=True)
        return
    c = None
    for _ in range(200):
        try:
            c = socket.create_connection((peer0, PORT))
            break
        except OSError:
            time.sleep(0.05)
    if c is None:
        raise SystemExit(f"stack_rate.py: rank 0 at {peer0}:{PORT} did not accept a connection in 10 s")
    sent = 0
    while sent < total:
        c.sendall(buf)
        sent += len(buf)
    c.close()


if __name__ == "__main__":
    main()
