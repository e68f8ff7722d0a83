"""Worker start-up and request cost on this host (CPU worker, the sandbox the host allows):
the time from ``new_worker(device)`` to its hello and its warmed profiler (each step of it:
harness/process.py ``start_phases``), the parent's round trip of ``ping`` and
of ``noop`` (the timed path without the call), and, in this process, the worker's own
``Worker.handle`` of ``ping`` and ``time_end`` (the request parsed through its model of
harness/protocol.py and dispatched; best of 5 x 20000) and the ``Worker()`` construction
(snapshot, guarded-name table, dispatcher baseline).

    PYTHONPATH=$PWD/src python bench/worker_start.py [--starts 5] [--pings 300] [--device cpu]

Prints one line per start and the medians (ms); ``--save`` writes them to
bench/results/worker_start.json. A/B: run it with PYTHONPATH set to each tree in turn, on the
same idle host (2-core hosts are noisy: compare medians of interleaved runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--pings", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--save", action="store_true")
    a = ap.parse_args()

    from solbench.harness import protocol
    from solbench.harness.workers import new_worker

    starts, pings, noops, phases = [], [], [], []
    for k in range(a.starts):
        t0 = time.perf_counter()
        h = new_worker(a.device)  # the worker a candidate gets: started, profiler warmed
        starts.append((time.perf_counter() - t0) * 1e3)
        phases.append(dict(h.start_phases))
        print(f"start {k} by step (s): {h.start_phases}", flush=True)
        try:
            for _ in range(a.pings):
                t = time.perf_counter()
                protocol.request(h, protocol.Ping(), timeout_s=30)
                pings.append((time.perf_counter() - t) * 1e3)
            for _ in range(a.pings):
                t = time.perf_counter()
                protocol.request(h, protocol.Noop(slot=None, flush=False), timeout_s=30)
                noops.append((time.perf_counter() - t) * 1e3)
        finally:
            h.close()
        print(f"start {k}: {starts[-1]:.0f} ms", flush=True)
    from solbench.harness.worker import Worker

    cons = []
    for _ in range(3):
        t = time.perf_counter()
        w = Worker(None, a.device)
        cons.append((time.perf_counter() - t) * 1e3)

    def per_us(op: str, n: int = 20000) -> float:
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                w.handle(op, {})
            best = min(best, (time.perf_counter() - t) / n * 1e6)
        return best

    steps = sorted({k for p in phases for k in p})
    res = {"device": a.device, "start_ms_median": statistics.median(starts), "start_ms": starts,
           "start_steps_s_median": {k: statistics.median(p.get(k, 0.0) for p in phases) for k in steps},
           "ping_ms_median": statistics.median(pings), "noop_ms_median": statistics.median(noops),
           "worker_init_ms_median": statistics.median(cons),
           "handle_ping_us": per_us("ping"), "handle_time_end_us": per_us("time_end")}
    print(f"start median {res['start_ms_median']:.0f} ms; ping round trip median "
          f"{res['ping_ms_median']:.3f} ms; noop round trip median {res['noop_ms_median']:.3f} ms; "
          f"Worker() median {res['worker_init_ms_median']:.0f} ms; handle ping "
          f"{res['handle_ping_us']:.2f} us, time_end {res['handle_time_end_us']:.2f} us; start steps (s, median) "
          f"{res['start_steps_s_median']}")
    if a.save:
        out = Path(__file__).parent / "results" / "worker_start.json"
        out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
