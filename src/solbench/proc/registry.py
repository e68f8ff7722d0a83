"""The one registry of the processes this process started for itself.

A process that evaluates candidates is a child subreaper (:func:`~.signals.become_subreaper`):
whatever a candidate leaves running (a double-forked daemon, a process that left the
worker's session) is re-parented to it, and the stray-process guard takes every child it
cannot account for as the candidate's. This registry is how it accounts for them:

- **workers**: the harness's worker processes (launchers, sandbox inits, workers);
- **helpers**: other children this process started for itself (the SOL counting child, the
  CLI's parent-death watchdog, a test's load generator), each with a flag: ``survive``
  helpers are spared by a shutdown (the watchdog must outlive the workers it backs up),
  the others are killed with the workers;
- **baseline**: the children this process already had when it first became the
  subreaper, before any worker existed (they cannot be a candidate's); spared by a shutdown.

:attr:`OwnProcesses.lock` (re-entrant) is held while a worker or helper is spawned and
registered, and while strays are listed, so a process started on another thread is never
seen between its fork and its registration. The registry satisfies the ``registry``
protocol of :class:`solbench.sol.isolated.CountingChild` (``lock``, ``add(pid)``,
``discard(pid)``).
"""

from __future__ import annotations

import os
import threading

from . import procfs


class OwnProcesses:
    """Pids of this process's own children; see the module docstring. One instance per
    process: :data:`OWN`."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        #: pids of live workers (the set object is shared: callers add and discard in place)
        self.workers: set[int] = set()
        self._helpers: dict[int, bool] = {}
        self._baseline: set[int] | None = None

    # ------------------------------------------------------------------ helpers
    def add(self, pid: int, survive: bool = False) -> None:
        """Register ``pid`` as a helper of this process (never a stray). ``survive``: spared
        by a shutdown (:meth:`spared_at_shutdown`)."""
        with self.lock:
            self._helpers[int(pid)] = bool(survive)

    def discard(self, pid: int) -> None:
        """Forget helper ``pid`` (it was reaped: its pid may be reused)."""
        with self.lock:
            self._helpers.pop(int(pid), None)

    def helpers(self, survive: bool | None = None) -> set[int]:
        """Registered helpers: all (``survive`` None) or those with that flag."""
        with self.lock:
            return {p for p, s in self._helpers.items() if survive is None or s == survive}

    # ------------------------------------------------------------------ baseline
    def mark_baseline(self) -> bool:
        """Record this process's children now as the baseline (once: later calls do
        nothing). True on the first call (the caller then becomes the subreaper)."""
        with self.lock:
            if self._baseline is not None:
                return False
            self._baseline = procfs.child_pids(os.getpid())
            return True

    @property
    def baseline(self) -> set[int]:
        """Children there before the first worker (empty before :meth:`mark_baseline`)."""
        with self.lock:
            return set(self._baseline or ())

    # ------------------------------------------------------------------ queries
    def known(self) -> set[int]:
        """Every pid accounted for: workers, helpers, baseline."""
        with self.lock:
            return set(self.workers) | set(self._helpers) | set(self._baseline or ())

    def spared_at_shutdown(self, baseline: bool = True) -> set[int]:
        """Children a shutdown leaves alone: ``survive`` helpers, and with ``baseline`` the
        children older than the first worker."""
        with self.lock:
            return self.helpers(survive=True) | (set(self._baseline or ()) if baseline else set())

    def unregistered_children(self) -> list[int]:
        """Every child of this process that is not accounted for (:meth:`known`): whatever a
        candidate left re-parented here, runtime helper or not. A finished orphan (a zombie
        with no thread left) is reaped here instead of listed: this process is its subreaper,
        nobody else will."""
        with self.lock:
            kids = sorted(procfs.child_pids(os.getpid()) - self.known())
        out = []
        for pid in kids:
            if procfs.state(pid) == "Z" and not procfs.running_tasks(pid):
                try:
                    os.waitpid(pid, os.WNOHANG)
                except OSError:
                    pass
                continue
            out.append(pid)
        return out


#: this process's registry
OWN = OwnProcesses()
