"""Every worker ``solbench eval`` starts carries the run's token (cli/lifetime.py: the
parent-death watchdog SIGKILLs every process whose environment holds it), the early
workers too. They are started at the process start, and were started before the watchdog
was armed: unsandboxed (``SOLBENCH_SANDBOX=off``, or a host where bubblewrap cannot
isolate), a candidate's daemon (tests/harness/cand_daemon_outlives_parent.py) outlived a
SIGKILLed ``solbench eval --spare-workers 2`` (the CUDA default), and did not without them."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAND = ROOT / "tests" / "harness" / "cand_daemon_outlives_parent.py"
MARK = "293.25"


def _daemons() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", MARK.encode()]:
                    out.append(int(pid))
        except OSError:
            continue
    return out


@pytest.mark.slow
def test_a_daemon_of_an_early_worker_dies_with_a_sigkilled_eval(tmp_path):
    sol = tmp_path / "daemon.json"
    sol.write_text(json.dumps({
        "name": "daemon", "definition": "relu_fp32", "author": "tests",
        "spec": {"languages": ["pytorch"], "entry_point": "cand.py::run", "destination_passing_style": False},
        "sources": [{"path": "cand.py", "content": CAND.read_text()}]}))
    assert not _daemons(), "a daemon of an earlier run is still there"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SOLBENCH_SANDBOX": "off"}
    p = subprocess.Popen([sys.executable, "-m", "solbench", "eval", "l1/relu_fp32", "-w", "0", "--device", "cpu",
                          "--rounds", "1", "--iters", "4", "--timeout", "120", "--spare-workers", "2", "-q",
                          "--solution", str(sol)], env=env, cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while not _daemons() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        assert _daemons(), "the candidate's daemon never started"
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 15
        while _daemons() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _daemons()
    finally:
        if p.poll() is None:
            p.kill()
        for pid in _daemons():
            os.kill(pid, signal.SIGKILL)
    assert left == []
