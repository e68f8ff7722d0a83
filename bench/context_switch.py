"""Does the parent's own GPU work between two timed calls slow the worker's next call?
(issue 29 item 3). On an H100 or H200 host a timed request costs the parent about 1 ms more
than the worker's own steps and the messaging add up to (bench/timed_call_steps.py,
bench/wakeup_latency.py, bench/results/device_s30_h100). Between two calls the parent uses
the GPU itself, from its own CUDA context (a fresh input set, its fill into a slot, the read
of the flush check); the worker's next flush and call then run after a switch of the
device from one process's context to the other's.

Two processes, each with its own CUDA context, a socket between them. The worker, per
request: fills a flush buffer of the harness's size, runs a small kernel, fills an end
marker, synchronizes, and reports its own time. The parent, between requests: nothing, or
what it does between two timed calls (a random set of N elements drawn and copied into a
buffer, then a synchronize), or the same work on the CPU. Reported: the parent's round trip,
the worker's own time, the parent's work, each ms a call (median, p90).

    python bench/context_switch.py [--n 300] [--elements 1048576] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import time


def _worker(sock: socket.socket, flush_bytes: int) -> None:
    import torch

    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
    x = torch.randn(1 << 16, device="cuda")
    end = torch.empty(1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    sock.sendall(b"r")
    i = 0
    while True:
        b = sock.recv(1)
        if not b or b == b"q":
            return
        t = time.perf_counter()
        flush.fill_(i)
        torch.cuda.synchronize()
        x.mul(2.0).add_(1.0)  # a small kernel pair, as a short call launches
        end.fill_(i)
        torch.cuda.synchronize()
        i += 1
        sock.sendall(struct.pack("!d", (time.perf_counter() - t) * 1e3))


def _q(xs):
    xs = sorted(xs)
    return round(statistics.median(xs), 4), round(xs[int(0.9 * len(xs))], 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--flush-bytes", type=int, default=100 << 20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a_sock, b_sock = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # before this process touches CUDA: the child makes its own context
        a_sock.close()
        try:
            _worker(b_sock, a.flush_bytes)
        finally:
            os._exit(0)
    b_sock.close()
    assert a_sock.recv(1) == b"r"
    import torch

    buf = torch.empty(a.elements, device="cuda")
    cbuf = torch.empty(a.elements)
    torch.cuda.synchronize()
    rows = []
    print("| parent between calls | round trip | worker's own time | parent's work |  (ms, median / p90)\n|---|---|---|---|")
    for mode in ("nothing", "GPU: a set drawn and copied, synchronize", "CPU: a set drawn and copied",
                 "nothing", "GPU: a set drawn and copied, synchronize"):
        rt, own, work = [], [], []
        for i in range(a.n + 20):
            t = time.perf_counter()
            if mode.startswith("GPU"):
                buf.copy_(torch.randn(a.elements, device="cuda"))
                torch.cuda.synchronize()
            elif mode.startswith("CPU"):
                cbuf.copy_(torch.randn(a.elements))
            t0 = time.perf_counter()
            a_sock.sendall(b"x")
            w = struct.unpack("!d", a_sock.recv(8))[0]
            t1 = time.perf_counter()
            if i >= 20:
                rt.append((t1 - t0) * 1e3)
                own.append(w)
                work.append((t0 - t) * 1e3)
        row = {"parent": mode, "roundtrip_ms": _q(rt), "worker_ms": _q(own), "parent_work_ms": _q(work)}
        rows.append(row)
        print(f"| {mode} | {row['roundtrip_ms'][0]} / {row['roundtrip_ms'][1]} | {row['worker_ms'][0]} / "
              f"{row['worker_ms'][1]} | {row['parent_work_ms'][0]} / {row['parent_work_ms'][1]} |", flush=True)
    a_sock.sendall(b"q")
    os.waitpid(pid, 0)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
