"""The parent-death watchdog's cost (solbench.proc.watchdog): ms from its launch until it
blocks reading its stdin pipe ("start", paid once per CLI command, beside the command's own
work) and ms from the parent's end of the pipe until it has swept the marked processes and
exited ("sweep", the delay of the backstop after a SIGKILL of solbench). Medians of N runs.

    PYTHONPATH=$PWD/src python bench/watchdog_latency.py [N] [OLD_SCRIPT.py]

OLD_SCRIPT: another watchdog script taking the same arguments (``VAR TOKEN``), timed the
same way in alternation, e.g. the pre-proc/ one: ``git show 98da513:src/solbench/cli/_watchdog.py``.
Prints a table and writes bench/results/watchdog_latency.json."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from solbench.proc import procfs
from solbench.proc import watchdog as W

_BLOCKED = ("pipe_read", "pipe_wait", "anon_pipe_read")  # wchan of a read on an empty pipe


def once(script: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-I", "-S", script, "SOLBENCH_BENCH_RUN", "tok"],
                         stdin=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 30
    while procfs.read_text(f"/proc/{p.pid}/wchan") not in _BLOCKED:
        if time.monotonic() > deadline:
            p.kill()
            raise RuntimeError(f"{script}: never blocked on its stdin")
        time.sleep(0.0005)
    t1 = time.perf_counter()
    p.stdin.close()
    p.wait(timeout=30)
    return (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    scripts = {"proc.watchdog": W.__file__}
    if len(sys.argv) > 2:
        scripts["other"] = sys.argv[2]
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in scripts}
    for _ in range(n):
        for k, s in scripts.items():
            runs[k].append(once(s))
    out = {k: {"start_ms": statistics.median(a for a, _ in r), "sweep_ms": statistics.median(b for _, b in r),
               "n": n} for k, r in runs.items()}
    for k, v in out.items():
        print(f"{k:14s} start {v['start_ms']:7.1f} ms   sweep {v['sweep_ms']:7.1f} ms   (median of {n})")
    dst = Path(__file__).resolve().parent / "results" / "watchdog_latency.json"
    dst.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
