"""What the parent's per-call /proc reads cost (harness/timed.py, harness/evidence.py), against
a child process holding torch and 38 idle threads (about 40 threads, as a worker has).

    python bench/procfs_cost.py [--n 300]

Prints ms per read for: the worker's descendants walk, its thread ids, the parent's stray
children, the run-queue marks of a timed call (main thread; every thread, the reference's
before it was read once a block: timed.worker_wait_ms), the worker's CPU time."""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

from solbench.harness import guards
from solbench.harness.process import stray_children
from solbench.harness.timed import load_wait_mark, worker_wait_ms
from solbench.proc import procfs

CHILD = ("import threading, time\nimport torch\nev = threading.Event()\n"
         "ts = [threading.Thread(target=ev.wait) for _ in range(38)]\n[t.start() for t in ts]\ntime.sleep(120)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    a = ap.parse_args()
    child = subprocess.Popen([sys.executable, "-c", CHILD])
    try:
        deadline = time.monotonic() + 60
        while len(procfs.thread_ids(child.pid)) < 39 and time.monotonic() < deadline:
            time.sleep(0.2)
        pid = child.pid
        print(f"child threads: {len(procfs.thread_ids(pid))}")
        cases = [
            ("descendants walk", lambda: procfs.descendants(pid)),
            ("thread ids", lambda: procfs.thread_ids(pid)),
            ("stray children of the parent", stray_children),
            ("unexplained children (walk given)", lambda: guards.unexplained_children(pid, set(), late=True,
                                                                                      desc=procfs.descendants(pid))),
            ("timed-call mark, main thread + CPU time", lambda: load_wait_mark(pid)),
            ("timed-call mark, parent only, no CPU time", lambda: load_wait_mark(pid, worker=False, cpu=False)),
            ("every thread's wait (worker_wait_ms)", lambda: worker_wait_ms(pid)),
            ("worker CPU time", lambda: procfs.process_cpu_ms(pid)),
        ]
        for name, f in cases:
            f()
            t = time.perf_counter()
            for _ in range(a.n):
                f()
            print(f"{name:52s} {(time.perf_counter() - t) / a.n * 1e3:.3f} ms")
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    main()
