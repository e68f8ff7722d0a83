"""What a request/reply round trip between two processes costs when both sides sleep between
requests, as the harness's parent and worker do around every timed call (issue 29 item 3).

On an H100 host a request with no work (``Ping``) took 0.086 ms back to back
(``bench/timed_call_steps.py``), yet the parent's timed calls cost about 1.2 ms more each than
the worker's own steps (bench/results/device_s30_h100). Between two timed calls the parent
works for about 0.5-1 ms (a fresh input set, its checks) while the worker waits in ``recv``,
and the reply reaches the parent's main thread through a reader thread and a queue. This
bench measures, with a plain socket pair and no harness code, the round trip for:

- ``gap``: what the requester does between two requests: nothing, a busy 1 ms, a 1 ms sleep;
- ``reader``: the reply read by the requesting thread itself, or by a reader thread that
  hands it over through a ``queue.Queue`` (the harness's ``WorkerHandle``);
- ``spin``: the answering process blocks in ``recv`` at once, or first polls its socket
  without blocking for up to 2 ms (a core that keeps running does not fall into a deep idle
  state between requests).

    python bench/wakeup_latency.py [--n 400] [--out FILE]

Prints one table, ms a round trip (median, p90)."""
from __future__ import annotations

import argparse
import json
import os
import queue
import select
import socket
import statistics
import threading
import time

SPIN_S = 0.002


def _answer(sock: socket.socket, spin: bool) -> None:
    while True:
        if spin:
            t = time.perf_counter()
            while time.perf_counter() - t < SPIN_S:
                if select.select([sock], [], [], 0)[0]:
                    break
        b = sock.recv(64)
        if not b or b == b"q":
            return
        sock.sendall(b)


def _gap(kind: str) -> None:
    if kind == "busy 1 ms":
        t = time.perf_counter()
        while time.perf_counter() - t < 1e-3:
            pass
    elif kind == "sleep 1 ms":
        time.sleep(1e-3)


def run(n: int, gap: str, reader: bool, spin: bool) -> tuple[float, float]:
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close()
        try:
            _answer(b, spin)
        finally:
            os._exit(0)
    b.close()
    q: queue.Queue = queue.Queue()
    th = None
    if reader:
        def rd():
            while True:
                m = a.recv(64)
                q.put(m)
                if not m:
                    return
        th = threading.Thread(target=rd, daemon=True)
        th.start()
    rts = []
    for i in range(n + 20):
        _gap(gap)
        t = time.perf_counter()
        a.sendall(b"x")
        if reader:
            q.get()
        else:
            a.recv(64)
        rts.append((time.perf_counter() - t) * 1e3)
    a.sendall(b"q")
    os.waitpid(pid, 0)
    a.close()
    xs = sorted(rts[20:])
    return statistics.median(xs), xs[int(0.9 * len(xs))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = []
    print("| gap between requests | reply read by | answerer | round trip, ms (median / p90) |\n|---|---|---|---|")
    for gap in ("none", "busy 1 ms", "sleep 1 ms"):
        for reader in (False, True):
            for spin in (False, True):
                m, p90 = run(a.n, gap, reader, spin)
                rows.append({"gap": gap, "reader_thread": reader, "spin": spin, "median_ms": m, "p90_ms": p90})
                print(f"| {gap} | {'reader thread + queue' if reader else 'the requester'} | "
                      f"{'polls 2 ms, then blocks' if spin else 'blocks at once'} | {m:.3f} / {p90:.3f} |",
                      flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
