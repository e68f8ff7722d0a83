"""``process.shutdown_all()`` (the CLI's Ctrl-C / SIGTERM handler) refuses new workers. A
worker start already under way on another thread when it runs (``solbench eval``'s early
workers start 0.2 s into the process, on the spare pool's threads, while the main thread
still imports torch) must not fork a worker after it: seen on this CPU host, a Ctrl-C that
``import torch`` swallowed (torch's NumPy initialisation clears the KeyboardInterrupt) let
the two early workers spawn after the shutdown, and the evaluation ran on to PASSED, exit 0.

The start is held where it was caught (the sandbox's mode resolved, before the fork) by a
gate in ``sandbox.resolve_mode``; the shutdown runs; the gate opens."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
    import json, threading
    from solbench.harness import process, sandbox
    from solbench.proc import procfs
    import os

    gate, entered = threading.Event(), threading.Event()
    real = sandbox.resolve_mode

    def held(device):
        entered.set()
        gate.wait(60)
        return real(device)

    sandbox.resolve_mode = held
    box = {}

    def start():
        try:
            box["h"] = process.WorkerHandle("cpu", start_timeout_s=60)
        except Exception as e:
            box["err"] = f"{type(e).__name__}: {e}"

    th = threading.Thread(target=start)
    th.start()
    entered.wait(60)
    process.shutdown_all()
    gate.set()
    th.join(90)
    h = box.get("h")
    out = {"err": box.get("err"), "started": h is not None,
           "children": sorted(procfs.child_pids(os.getpid()))}
    if h is not None:
        h.kill()
    print(json.dumps(out), flush=True)
"""


def test_a_start_under_way_at_shutdown_forks_no_worker():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD)], capture_output=True, text=True,
                       env=env, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert not out["started"], out
    assert "shutting down" in (out["err"] or ""), out
    assert out["children"] == [], out
