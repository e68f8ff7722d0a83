"""Signals to processes: killing a process tree and its groups, stopping and continuing a
tree (the harness's freeze), reaping a killed child, finding processes by an environment
marker, and the child-subreaper role.

Every function tolerates processes that are gone (ESRCH) or not ours to signal (EPERM):
between a read of /proc and a signal a process may exit, and its pid then means nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

from . import procfs

#: prctl(2) option numbers (linux/prctl.h)
PR_SET_CHILD_SUBREAPER = 36


def send(pids: Iterable[int], sig: int) -> list[int]:
    """Send ``sig`` to each of ``pids`` by pid, in order; returns those it reached (a gone
    or foreign process is skipped)."""
    out = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            out.append(pid)
        except OSError:
            pass
    return out


def send_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; whether it reached any member."""
    try:
        os.killpg(pgid, sig)
        return True
    except OSError:
        return False


def tree(root: int) -> list[int]:
    """``root`` and its descendants (children before grandchildren is not promised; sorted
    by pid after the root)."""
    return [root, *sorted(procfs.descendants(root))]


def kill_tree(root: int, groups: Iterable[int] = ()) -> list[int]:
    """SIGKILL ``root``, every descendant of it and the process groups of ``root``, of
    ``groups`` and of each descendant that leads its own group (a candidate's
    ``setpgid(0, 0)``); the descendants are listed before anything is killed, since a
    killed parent's children are re-parented away. Returns the pids SIGKILLed by pid. Reaps
    nothing: the caller waits for its own child."""
    pids = tree(root)
    for g in dict.fromkeys([root, *groups]):
        if g:
            send_group(g, signal.SIGKILL)
    for p in pids[1:]:
        try:
            if os.getpgid(p) == p:
                send_group(p, signal.SIGKILL)
        except OSError:
            pass
    return send(pids, signal.SIGKILL)


def stop_tree(root: int, settle_s: float = 0.25, poll_s: float = 0.002) -> list[int]:
    """SIGSTOP ``root`` and every descendant, top down, until every process of the tree is
    seen stopped (or gone) on two passes in a row with no new one: a process forked while
    its parent was being stopped, or still running on another core when its SIGSTOP was
    sent, is caught on a later pass. At most ``settle_s`` of passes. Returns the pids
    stopped (for :func:`send` of SIGCONT)."""
    done: list[int] = []
    seen: set[int] = set()
    deadline = time.monotonic() + settle_s
    calm = 0
    while True:
        new = [p for p in tree(root) if p not in seen]
        seen.update(new)
        done += send(new, signal.SIGSTOP)
        if new:
            calm = 0
        elif all(procfs.state(p) in (None, "T", "t", "Z", "X") for p in seen):
            calm += 1
        if calm >= 2 or time.monotonic() > deadline:
            return done
        time.sleep(poll_s)


def wait_stopped(pids: Iterable[int], wait_s: float, poll_s: float = 0.0001) -> bool:
    """Wait until no thread of any of ``pids`` can run (:func:`procfs.running_tasks`: a
    SIGSTOP lands on a thread running on another core only when that core next enters the
    kernel). True when all are stopped or gone, False when one still runs after ``wait_s``."""
    pids = list(pids)
    deadline = time.monotonic() + wait_s
    while any(procfs.running_tasks(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
    return True


def reap(proc, timeout_s: float = 5.0, tries: int = 2) -> int | None:
    """Wait for the (killed) child ``proc`` (a :class:`subprocess.Popen`); its exit status, or None when it cannot be
    reaped in ``tries`` x ``timeout_s``. A traced process (ptrace) is reported to its tracer
    first, so a tracer that never waits would hold this wait for ever: after each timeout the
    tracer (:func:`procfs.tracer_pid`) is SIGKILLed."""
    import subprocess

    for _ in range(tries):
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            tracer = procfs.tracer_pid(proc.pid)
            if tracer:
                send([tracer], signal.SIGKILL)
    return None


def marked(var: str, token: str) -> list[int]:
    """Processes whose environment holds ``var=token`` exactly (:func:`procfs.has_env`),
    this process excluded. A process that replaced its environment block is not found."""
    entry = f"{var}={token}".encode()
    me = os.getpid()
    return [p for p in procfs.all_pids() if p != me and procfs.has_env(p, entry)]


def kill_marked(var: str, token: str, sweeps: int = 1) -> list[int]:
    """SIGKILL every process :func:`marked` with ``var=token`` (a token given to one child
    and inherited by all it starts: those that left its session or were re-parented away
    are found too), sweeping again, up to ``sweeps`` times, while a sweep still killed one
    (a process may fork while it is being killed). Returns the pids killed."""
    killed: list[int] = []
    for _ in range(max(1, sweeps)):
        hit = send(marked(var, token), signal.SIGKILL)
        killed += hit
        if not hit:
            break
    return killed


def become_subreaper() -> bool:
    """Make this process the Linux child subreaper (prctl PR_SET_CHILD_SUBREAPER, prctl(2)):
    orphans of its descendants (a double-forked, setsid'd daemon) are re-parented to it
    instead of to init, where its children files show them. Whether prctl succeeded."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def kill_own_descendants(rounds: int = 50) -> int:
    """SIGKILL every descendant of this process and reap them: the children now, the
    grandchildren on a later pass, once they are re-parented here (this process should be a
    subreaper: :func:`become_subreaper`). Returns how many it killed."""
    n = 0
    me = os.getpid()
    for _ in range(rounds):
        kids = procfs.child_pids(me)
        if not kids:
            break
        n += len(send(kids, signal.SIGKILL))
        for c in kids:
            try:
                os.waitpid(c, 0)
            except ChildProcessError:
                pass
    return n
