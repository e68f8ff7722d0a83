"""Holding the candidate's processes stopped: what is stopped, when, and why.

Only the process being timed runs, and a timed worker computes only inside the windows the
parent times (docs/threats.md, principles 8 and 3: both sides measured alike, all the work
timed). Two holds, both by SIGSTOP/SIGCONT from the parent (:mod:`solbench.proc.signals`):

- while the eager reference is timed, every process of the candidate's is stopped
  (:func:`freeze_candidate`): its worker's process group, by pid every descendant of the
  worker and every other process of its sandbox, and anything re-parented to the harness (a
  double fork); one that escaped (another session, a task still running once SIGSTOP had
  time to land) is ``child_process`` (REWARD_HACK) and is killed. :func:`thaw` resumes them.
- on the CPU, a timed worker (the candidate's or the reference's) is held stopped between
  its timed calls (:class:`Hold`): it runs only inside the windows the parent times, so no
  thread or process of it can compute anything between its calls. While it is held the
  parent writes the cache flush into the buffer it owns (:func:`parent_flush`), so not even
  the flush is the worker's code outside a window.

Stopping is judged by reading every task's state in /proc (:mod:`solbench.proc.procfs`),
never by the signal having been sent: on a loaded host a thread ran on for up to 15 ms after
``kill()`` returned.
"""

from __future__ import annotations

import os
import signal
import time

from .. import limits
from ..proc import procfs, signals
from ..spec.trace import Finding
from .checks import finding
from .evidence import CandidateError
from .process import WorkerHandle, unregistered_children


def parent_flush(slots, value: int, pid: int) -> tuple[float, bool]:
    """The CPU held path's cache flush, written by the parent into the flush buffer it owns
    (``slots.flush``, int32, every element set to ``value``) while every process of the
    worker ``pid`` is stopped: no code of the worker's runs for it, so nothing of the
    candidate's can run outside a timed window (docs/harness.md, "CPU: the parent's clock
    only"). The writing thread is moved for the flush onto the CPU the worker's main thread
    last ran on, so that CPU's private caches are evicted as by the worker's own flush
    before (a worker thread elsewhere keeps its private caches, as it did then); where that
    CPU is not allowed to the parent, the flush runs where the parent is. One thread
    (numpy's fill): the parent's torch runs single-threaded while timing. Returns (ms the
    write took on the parent's clock, whether it ran on the worker's CPU)."""
    if slots.flush is None:
        return 0.0, False
    cpu = procfs.last_cpu(pid)
    prev = None
    if cpu is not None:
        try:
            prev = os.sched_getaffinity(0)  # 0: the calling thread (Linux)
            if cpu in prev:
                os.sched_setaffinity(0, {cpu})
            else:
                prev = None
        except OSError:
            prev = None
    t0 = time.perf_counter()
    try:
        slots.flush.numpy().fill(value & 0x7FFFFFFF)
    finally:
        ms = (time.perf_counter() - t0) * 1e3
        if prev is not None:
            os.sched_setaffinity(0, prev)
    return ms, prev is not None


def freeze_all(h: WorkerHandle) -> list[int]:
    """SIGSTOP, by pid, every descendant of the candidate's worker and every unregistered child
    of this process, after the worker's process group was stopped: a process in its own
    session or re-parented here is outside that group. No allow-list: an honest runtime
    helper (inductor's compile pool) is stopped too, it has nothing to do while the reference
    runs. Returns the pids stopped (for :func:`thaw`)."""
    pids = sorted(procfs.descendants(h.pid)) + h.outside_worker_tree() + unregistered_children()
    signals.send(pids, signal.SIGSTOP)
    return pids


def thaw(h: WorkerHandle, pids: list[int]) -> None:
    signals.send(pids, signal.SIGCONT)
    h.resume()


def unfrozen(h: WorkerHandle, frozen: list[int], wait_s: float = limits.PAUSE_LAND_S,
             poll_s: float = 0.0005) -> list[dict]:
    """Processes of the candidate's that escaped the pause: any descendant of its worker in
    another session than the worker's (it left the process group on purpose; honest runtime
    helpers, inductor's compile pool included, stay in it), any unregistered child of this
    process (re-parented here: a double fork), and any of them with a thread that still runs
    once SIGSTOP had ``wait_s`` to land (every thread is read: a process whose main thread
    exited runs on in its others)."""
    sid = procfs.session_id(h.pid)
    deadline = time.monotonic() + wait_s
    while True:
        out = []
        for pid in sorted(set(procfs.descendants(h.pid)) | set(frozen)):
            run = procfs.running_tasks(pid)
            if not run and procfs.state(pid) in (None, "Z", "X") and len(procfs.thread_ids(pid)) <= 1:
                continue  # gone, or a zombie with no thread left (nothing can run)
            other = sid is not None and procfs.session_id(pid) not in (None, sid)
            if other or run:
                out.append({"pid": pid, "other_session": other, "running": run,
                            "cmdline": procfs.cmdline(pid)[:200]})
        out += [{"pid": pid, "reparented": True, "cmdline": procfs.cmdline(pid)[:200]}
                for pid in unregistered_children()
                if procfs.running_tasks(pid) or procfs.state(pid) not in (None, "Z", "X")]
        # in the sandbox but outside the worker's tree: left it on purpose (CLONE_PARENT)
        out += [{"pid": pid, "outside_worker_tree": True, "cmdline": procfs.cmdline(pid)[:200]}
                for pid in h.outside_worker_tree()
                if procfs.running_tasks(pid) or procfs.state(pid) not in (None, "Z", "X")]
        if not out or time.monotonic() > deadline or any(
                x.get("other_session") or x.get("reparented") or x.get("outside_worker_tree") for x in out):
            return out
        time.sleep(poll_s)


def freeze_candidate(h: WorkerHandle, findings: list[Finding], poll_s: float = 0.0005,
                     wait_s: float = limits.PAUSE_LAND_S) -> list[int]:
    """Stop every process of the candidate's (its worker's process group and, by pid, every
    other process of its sandbox and anything re-parented here: :func:`freeze_all`) and
    check that none of them still runs (:func:`unfrozen`). One escaped (another session, a
    process outside the worker's tree, a task still running once SIGSTOP had time to land)
    is ``child_process`` (REWARD_HACK): it is killed and the workload ends
    (:class:`CandidateError`). Returns the pids stopped besides the worker's group.
    ``poll_s``: how often the tasks are read again while some still run (the deadline is
    ``wait_s`` whatever it is; a 10 ms poll made every pause before a reference block wait
    10 ms for a stop that lands within about a millisecond, as the held path's 0.5 ms one does)."""
    h.pause()
    frozen = freeze_all(h)
    running = unfrozen(h, frozen, wait_s=wait_s, poll_s=poll_s)
    if running:
        findings.append(finding(
            "child_process",
            "processes of the candidate kept running while its worker was stopped: "
            f"{running[:3]}", {"processes": running[:20]}))
        signals.send([r["pid"] for r in running], signal.SIGKILL)
        thaw(h, frozen)
        raise CandidateError("a process of the candidate ran while its worker was stopped")
    return frozen



class Hold:
    """Keeps every process of one worker's sandbox stopped except inside the calls the
    parent times (the CPU timing path; threats.md principle 3).

    A timed call's window is, on the parent's clock: :meth:`cont` (SIGCONT), the request,
    its reply, :meth:`stop` (SIGSTOP, and the wait until no task of the worker or of the
    known processes runs). :meth:`settle`, outside the window, stops every process of the
    sandbox by a full scan (a process made during the call) and waits again; only then does
    the parent fill the next call's inputs. So
    no thread or process of the candidate's can compute anything between its calls (from
    inputs the parent is filling, or to finish a call after its reply): all of its work
    falls inside a window the parent measures. The reference's worker is held the same way
    (``candidate`` False: its own processes only, never the candidate's leftovers), so both
    sides' windows hold the same harness steps."""

    def __init__(self, h: WorkerHandle, findings: list[Finding] | None, candidate: bool):
        self.h = h
        self.findings = findings
        self.candidate = candidate
        #: processes stopped by pid besides the worker's process group (known at the last settle)
        self.pids: list[int] = []
        #: how long a task may take to be seen stopped before it counts as running on
        self.wait_s = limits.HOLD_LAND_S

    def stop(self) -> None:
        """Inside the window: SIGSTOP the worker's group, its pid and the known pids, then wait
        until none of their tasks runs. The window ends there, not when the signals are
        sent: on a loaded host (a VM's vCPUs shared with other jobs) a thread ran on for up
        to 15 ms after kill() returned (p99 12 ms over 200 stops, 2 spinning threads)."""
        self.h.pause()
        # by pid too, whatever pause() reaches (the worker may have left its process group)
        signals.send((self.h.pid, *self.pids), signal.SIGSTOP)
        self._wait([self.h.pid, *self.pids])

    def _wait(self, pids: list[int]) -> None:
        if not signals.wait_stopped(pids, self.wait_s, poll_s=0.0001):
            raise CandidateError("a thread of the worker kept running after SIGSTOP "
                                 f"({self.wait_s} s)")

    def cont(self) -> None:
        signals.send(self.pids, signal.SIGCONT)
        self.h.resume()

    def settle(self) -> None:
        """Outside the window: stop every process of the sandbox and wait until none of its
        tasks runs. Raises :class:`CandidateError` (with a ``child_process`` finding for the
        candidate) when one keeps running."""
        h = self.h
        if self.candidate:
            self.pids = freeze_candidate(h, self.findings if self.findings is not None else [],
                                         poll_s=0.0005, wait_s=self.wait_s)
        else:
            self.h.pause()
            self.pids = sorted(procfs.descendants(h.pid)) + h.outside_worker_tree()
            signals.send(self.pids, signal.SIGSTOP)
        signals.send([h.pid], signal.SIGSTOP)  # by pid, whatever the group stop reached
        self._wait([h.pid, *self.pids])
