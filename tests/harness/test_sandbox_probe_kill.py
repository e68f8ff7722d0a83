"""The sandbox's probe (``bwrap ... true``, harness/sandbox.py ``_probe``) runs in the process
group of its own, so a Ctrl-C's sweep (``signals.kill_tree`` of this process's children)
takes all of it. Seen on this CPU host: a SIGINT in the first 2 s of ``solbench eval
--spare-workers 2`` (the early workers resolve the sandbox 0.2 s into the process) killed the
probe's bwrap while it was building the namespace; its just-cloned child (the namespace's
init, not yet in the listing kill_tree makes first) lived on, asleep, for good, holding the
probe's output pipes, so the probe waited its whole SANDBOX_PROBE_S (30 s) and the command
with it. A stand-in bwrap leaves a process outside its tree the same way (a double fork)."""

import os
import signal
import threading
import time

from solbench.harness import sandbox
from solbench.proc import procfs, signals
from solbench.proc.registry import OWN

MARK = "297.125"  # the stand-in's leftover: `sleep 297.125`

FAKE = f"""#!/bin/sh
( sleep {MARK} & )
sleep 300
"""


def _leftovers() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _cmd(p) == ["sleep", MARK]]


def _cmd(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def test_a_killed_probe_leaves_nothing_and_returns_at_once(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    monkeypatch.setattr(sandbox, "_probed", {})
    monkeypatch.setattr(sandbox, "SANDBOX_PROBE_S", 20.0)
    before = set(procfs.child_pids(os.getpid()))
    box = {}

    def probe():
        t = time.monotonic()
        box["res"] = sandbox._probe("uid", "cpu")
        box["s"] = time.monotonic() - t

    th = threading.Thread(target=probe)
    th.start()
    try:
        deadline = time.monotonic() + 10
        while not _leftovers() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _leftovers(), "the stand-in did not start"
        # the harness's own helper: never a candidate's stray for the process guard (the
        # stand-in's own process; its double-forked leftover is adopted by this process
        # when an earlier test made it a subreaper, and is no helper of anyone's)
        probe_kids = {p for p in set(procfs.child_pids(os.getpid())) - before if str(fake) in _cmd(str(p))}
        assert probe_kids, "the stand-in is not a child of this process"
        assert not set(OWN.unregistered_children()) & probe_kids
        for pid in set(procfs.child_pids(os.getpid())) - before:  # the Ctrl-C's sweep
            signals.kill_tree(pid)
        th.join(25)
        left = _leftovers()
    finally:
        for pid in _leftovers():
            signals.send([pid], signal.SIGKILL)
    assert box["res"][0] is False
    assert box["s"] < 5, box
    assert left == []
    # a probe killed from outside says nothing of the host: not kept, the next one runs again
    assert sandbox._probed == {}
