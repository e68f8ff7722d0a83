"""Worker processes left below a test process: the CLI tests that start `solbench` as a child
and check that none of its workers outlives it use these (a worker the command left behind is
adopted by the test process, made a subreaper, instead of by init; workers of tests run beside
this one are not below it)."""

import os
from pathlib import Path

import pytest


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2:].split()[1])


def my_workers(marker: bytes = b"solbench.harness.worker") -> set[int]:
    """Worker processes below this test process (other processes' workers, e.g. tests run
    beside this one, are not ours); ``marker``: what their command line holds (SOL counting
    children: ``b"solbench.sol.isolated"``)."""
    me, out = os.getpid(), set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker not in cmd:
            continue
        p = int(pid)
        while p not in (None, 0, 1):
            if p == me:
                out.add(int(pid))
                break
            p = _ppid(p)
    return out


def subreaper() -> None:
    """This process adopts its orphaned descendants (PR_SET_CHILD_SUBREAPER), so a worker the
    command left behind is found below it instead of below init."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) refused")
