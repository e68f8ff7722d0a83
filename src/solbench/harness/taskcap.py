"""A bound on the tasks (processes and threads) of one worker's sandbox, in every sandbox mode.

Why not RLIMIT_NPROC alone: the kernel does not enforce it for a process with
CAP_SYS_RESOURCE or CAP_SYS_ADMIN in the initial user namespace, nor for real uid 0
(``kernel/fork.c``, copy_process), and in ``userns`` mode the worker keeps the harness's host
uid (root on the CUDA hosts: legacy CUDA IPC refuses another uid). Measured here under bwrap
with the ``userns`` arguments: a process with RLIMIT_NPROC 64 started 200 threads.

Mechanisms, strongest first (:func:`mechanism` says which one this host gets; every trace's
``environment.sandbox["tasks"]`` carries it):

- ``cgroup_v2`` / ``cgroup_v1``: a child cgroup of the harness's own in the pids hierarchy,
  ``pids.max`` = the limit (Documentation/admin-guide/cgroup-v2.rst, "PID"; cgroup-v1/pids.rst).
  The launcher joins it before it execs bwrap, so every task of the sandbox, bwrap's init
  included, is counted from its first instant; fork/clone past the limit fails with EAGAIN,
  whatever the uid or capabilities. The parent also watches ``pids.events`` and kills the
  whole cgroup at the first refused fork, so a candidate that retries ends at once instead
  of spinning until its time limit. The cgroup is removed when the worker ends.
- ``watchdog``: where no cgroup can be made (no pids controller, not delegated, read-only
  cgroupfs), a parent thread counts the tasks of the launched process and its descendants
  every :data:`WATCHDOG_INTERVAL_S` (the worker is a child subreaper and bwrap's init is the
  pid namespace's pid 1, so no process of the sandbox leaves that tree) and kills the
  sandbox when the count reaches the limit. It bounds a fork bomb by what it can start in
  one interval; the kernel's own limits (pid_max, threads-max) are the rest.

RLIMIT_NPROC stays set in every mode (sandbox.limits): in ``uid`` mode (a pool uid) it binds
too. Hitting the limit ends the worker; the evaluator's request then fails with
:class:`~solbench.harness.process.WorkerDied` whose reason names the limit, and the workload's
status is decided from that failure by :mod:`solbench.harness.verdict` (RUNTIME_ERROR), with
the advisory finding ``task_limit`` carrying the evidence.

Environment: ``SOLBENCH_SANDBOX_NPROC`` (the limit), ``SOLBENCH_SANDBOX_PIDS_CGROUP`` =
``auto`` (default) | ``0`` (never make a cgroup: the watchdog alone, for tests and diagnosis).
"""

from __future__ import annotations

import atexit
import errno
import os
import signal
import subprocess
import threading
import time
from typing import Any

from .. import limits, paths
from ..proc import procfs, signals

#: seconds between two looks of the parent's monitor (pids.events, or the watchdog's count)
WATCHDOG_INTERVAL_S = 0.1
#: prefix of the cgroups this module makes (``<prefix><harness pid>-<n>``)
PREFIX = "solbench-"

_lock = threading.Lock()
_probe_cache: dict[str, dict[str, Any]] = {}
_seq = 0
#: this process's cgroups whose removal timed out (a task not yet reaped): removed by a later
#: release, a probe, or at exit
_pending: set[str] = set()


def default_limit() -> int:
    """Tasks one sandbox may hold: ``SOLBENCH_SANDBOX_NPROC``, else max(4096, 32 x CPUs).

    Why this margin: an honest worker holds one intra-op thread per CPU (OpenMP/ATen), a
    few runtime threads (CUDA driver, CUPTI, the harness's reader), and at most one pool of
    compile workers (inductor: min(32, CPUs) processes) or one parallel C++ build (ninja:
    CPUs + 2 jobs of a few processes each). 32 processes of one thread per CPU each is
    above all of these on any host; 4096 keeps the small hosts' margin (the peak of the
    honest candidates measured on this project's 2-CPU host was far below: docs/isolation.md).
    """
    env = paths.sandbox_nproc()
    if env is not None:
        return env
    return max(4096, 32 * (os.cpu_count() or 1))


# ------------------------------------------------------------------ finding the hierarchy
def parse_mountinfo(text: str, controller: str = "pids") -> dict[str, str]:
    """Mount points of the cgroup hierarchies in ``/proc/self/mountinfo`` text:
    ``{"v2": path}`` for cgroup2, ``{"v1:<controller>": path}`` for a v1 hierarchy holding
    ``controller`` (proc(5): field 5 is the mount point, the super options follow ``-`` and
    the fstype). The first mount of each wins."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        f, r = left.split(), right.split()
        if len(f) < 5 or len(r) < 3:
            continue
        mnt = f[4].replace("\\040", " ")
        if r[0] == "cgroup2":
            out.setdefault("v2", mnt)
        elif r[0] == "cgroup" and controller in r[2].split(","):
            out.setdefault(f"v1:{controller}", mnt)
    return out


def parse_proc_cgroup(text: str, controller: str = "pids") -> dict[str, str]:
    """The process's cgroup paths from ``/proc/self/cgroup`` text: ``{"v2": "/a/b"}`` from the
    ``0::`` line, ``{"v1:<controller>": "/x"}`` from the line whose controllers include
    ``controller`` (cgroups(7), "/proc/[pid]/cgroup")."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, ctrls, path = parts
        if hid == "0" and ctrls == "":
            out["v2"] = path
        elif controller in ctrls.split(","):
            out[f"v1:{controller}"] = path
    return out


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _own_base(controller: str = "pids", v1_file: str = "cgroup.procs") -> tuple[str | None, str | None, str]:
    """(kind, directory, why): the directory under which this process may make cgroups of
    ``controller`` (its own cgroup in that hierarchy: v2 with the controller enabled for
    its children, else v1 where ``v1_file`` is visible), or (None, None, the reason)."""
    try:
        mounts = parse_mountinfo(_read("/proc/self/mountinfo"), controller)
        mine = parse_proc_cgroup(_read("/proc/self/cgroup"), controller)
    except OSError as e:
        return None, None, f"cannot read /proc/self: {e}"
    reasons = []
    v1 = f"v1:{controller}"
    if "v2" in mounts and "v2" in mine:
        d = os.path.normpath(os.path.join(mounts["v2"], mine["v2"].lstrip("/")))
        try:
            ctrl = _read(os.path.join(d, "cgroup.controllers")).split()
            if controller not in ctrl:
                reasons.append(f"cgroup2 at {d}: no {controller} controller (controllers: {' '.join(ctrl) or 'none'})")
            else:
                sub = _read(os.path.join(d, "cgroup.subtree_control")).split()
                if controller not in sub:
                    # enabling it fails with EBUSY while this cgroup holds processes and is not
                    # the root (cgroup-v2.rst, "no internal process constraint")
                    _write(os.path.join(d, "cgroup.subtree_control"), f"+{controller}")
                return "cgroup_v2", d, ""
        except OSError as e:
            reasons.append(f"cgroup2 at {d}: {controller} not delegated "
                           f"({errno.errorcode.get(e.errno, e.errno)}: {e.strerror})")
    else:
        reasons.append("no cgroup2 mount")
    if v1 in mounts and v1 in mine:
        d = os.path.normpath(os.path.join(mounts[v1], mine[v1].lstrip("/")))
        if os.path.isfile(os.path.join(d, v1_file)):
            return "cgroup_v1", d, ""
        reasons.append(f"cgroup v1 {controller} at {d}: not visible")
    else:
        reasons.append(f"no cgroup v1 {controller} hierarchy")
    return None, None, "; ".join(reasons)


def _clean_stale(base: str, prefix: str = PREFIX) -> None:
    """Remove cgroups named ``<prefix><harness pid>-...`` made for a harness that no longer
    runs (SIGKILLed before it could): empty by then (the pid namespace died with its init),
    so rmdir succeeds."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for n in names:
        if not n.startswith(prefix):
            continue
        try:
            owner = int(n[len(prefix):].split("-")[0])
        except ValueError:
            continue
        if owner != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(base, n))
            except OSError:
                pass


def check_join(path: str) -> None:
    """A real join of cgroup ``path``, as a launcher does it (a shell writes its pid to
    ``cgroup.procs``): a writable-looking cgroup.procs can still refuse a move (a v2
    hierarchy's delegation rules, a container's read-only view), and a launcher that cannot
    join would fail every worker's start. Raises PermissionError saying why."""
    r = subprocess.run(["/bin/sh", "-c", 'echo $$ > "$0"', os.path.join(path, "cgroup.procs")],
                       capture_output=True, text=True, timeout=limits.CGROUP_JOIN_PROBE_S)
    if r.returncode != 0:
        raise PermissionError(errno.EACCES, "a process cannot join it: "
                              + (r.stderr.strip().splitlines() or ["sh failed"])[-1])


def join_argv(path: str, argv: list[str]) -> list[str]:
    """``argv`` launched by a shell that first moves itself into cgroup ``path``, then execs
    it (the same process: its pid, fds and parent-death signal are the launcher's)."""
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(path, "cgroup.procs")] + list(argv)


def probe_cgroup(env: str, want: str, controller: str, v1_file: str, prefix: str, fallback: str,
                 set_limit, cache: dict, lock, refresh: bool = False, before=None) -> dict[str, Any]:
    """Can this process make a cgroup of ``controller`` for a worker? Makes one named
    ``<prefix><pid>-probe``, gives it a limit (``set_limit(path, kind)``), joins a shell to
    it and removes it; the answer is cached in ``cache`` (under ``lock``) per ``want``, the
    value of the environment variable ``env`` as :mod:`solbench.paths` reads it
    (``0``/``off``/``no``: never a cgroup). ``before()`` runs
    once a hierarchy is found, before the probe cgroup is made. The one probe of
    :func:`probe` (pids) and :func:`solbench.harness.memcap.probe` (memory).

    Returns ``{"mechanism": "cgroup_v2"|"cgroup_v1"|fallback, "base": dir|None, "reason": why
    no cgroup ("" when there is one)}``."""
    with lock:
        if want in cache and not refresh:
            return dict(cache[want])
    if want in ("0", "off", "no"):
        res = {"mechanism": fallback, "base": None, "reason": f"{env}=0"}
    else:
        kind, base, why = _own_base(controller, v1_file)
        res = {"mechanism": fallback, "base": None, "reason": why}
        if kind is not None:
            _clean_stale(base, prefix)
            if before is not None:
                before()
            test = os.path.join(base, f"{prefix}{os.getpid()}-probe")
            try:
                os.mkdir(test)
                try:
                    set_limit(test, kind)
                    check_join(test)
                finally:
                    _rmdir_when_empty(test)
                res = {"mechanism": kind, "base": base, "reason": ""}
            except OSError as e:
                res["reason"] = f"{kind} at {base}: cannot make a child cgroup ({e.strerror or e})"
    with lock:
        cache[want] = res
    return dict(res)


def probe(refresh: bool = False) -> dict[str, Any]:
    """Can this process make a pids cgroup for a worker? Makes and removes one (cached;
    :func:`probe_cgroup`).

    Returns ``{"mechanism": "cgroup_v2"|"cgroup_v1"|"watchdog", "base": dir|None,
    "reason": why no cgroup ("" when there is one)}``."""
    return probe_cgroup(paths.SANDBOX_PIDS_CGROUP, paths.sandbox_pids_cgroup(), "pids", "cgroup.procs", PREFIX, "watchdog",
                        lambda path, kind: _write(os.path.join(path, "pids.max"), "64"),
                        _probe_cache, _lock, refresh, before=retry_pending)


def _rmdir_when_empty(path: str, timeout_s: float = limits.CGROUP_RMDIR_S) -> None:
    """Remove a cgroup directory once the process that joined it has exited (a cgroup with
    a task, even one exiting, cannot be removed: EBUSY)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.rmdir(path)
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def mechanism() -> str:
    """``cgroup_v2``, ``cgroup_v1`` or ``watchdog``: what bounds a sandbox's tasks here."""
    return probe()["mechanism"]


def status(mode: str) -> dict[str, Any]:
    """The task bound of a worker of sandbox ``mode`` on this host, for the trace:
    ``{"limit": N, "bound_by": [...], "kernel_enforced": bool, "cgroup_unavailable": str|None}``.
    ``bound_by`` lists what binds, strongest first: the cgroup's ``pids.max``,
    ``RLIMIT_NPROC`` (``uid`` mode only: the worker's uid is an unprivileged pool uid), and
    the ``watchdog`` when no cgroup could be made."""
    p = probe()
    bound = []
    if p["mechanism"] != "watchdog":
        bound.append(f"{p['mechanism']} pids.max")
    if mode == "uid":
        bound.append("RLIMIT_NPROC")
    if p["mechanism"] == "watchdog":
        bound.append("watchdog")
    return {"limit": default_limit(), "bound_by": bound,
            "kernel_enforced": bound[0] != "watchdog",
            "cgroup_unavailable": p["reason"] or None}


# ------------------------------------------------------------------ one worker's bound
class TaskCap:
    """The task bound of one worker's sandbox (made before the worker is launched).

    Use: ``cmd = cap.wrap(cmd)`` before the spawn (the launcher joins the cgroup, then execs
    ``cmd``); ``cap.watch(proc_pid, init_pid)`` once it runs; ``cap.release()`` after the
    worker is killed (kills whatever is left in the cgroup, removes it). ``hit`` is None, or
    the evidence once the limit was reached (the sandbox is killed by then)."""

    def __init__(self, limit: int | None = None):
        global _seq
        self.limit = int(limit if limit is not None else default_limit())
        p = probe()
        self.mechanism = p["mechanism"]
        self.path: str | None = None
        self.hit: dict[str, Any] | None = None
        self.reason: str | None = p["reason"] or None
        self._pids: list[int] = []
        self._released = False
        if p["base"] is not None:
            with _lock:
                _seq += 1
                n = _seq
            path = os.path.join(p["base"], f"{PREFIX}{os.getpid()}-{n}")
            try:
                os.mkdir(path)
                _write(os.path.join(path, "pids.max"), str(self.limit))
                self.path = path
            except OSError as e:  # made by the probe a moment ago: say so, fall back
                try:
                    os.rmdir(path)
                except OSError:
                    pass
                self.mechanism = "watchdog"
                self.reason = f"could not make {path}: {e}"

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` launched by a shell that first moves itself into the cgroup, then execs it
        (the same process: its pid, fds and parent-death signal are the launcher's)."""
        return list(argv) if self.path is None else join_argv(self.path, argv)

    def watch(self, *pids: int) -> None:
        """Start watching: ``pids`` are launched processes (children of this process): the
        watchdog counts them and their descendants; every mechanism kills them at a hit.
        A pid is looked at only while it is still this process's unreaped child, so a pid
        reused after the worker was reaped is never counted or signalled."""
        self._pids = [p for p in pids if p]
        _MONITOR.add(self)

    def _live(self) -> list[int]:
        return [p for p in self._pids if _own_child(p)]

    # -- reading
    def tasks(self) -> int:
        """Tasks of the sandbox now (the cgroup's pids.current, else the watchdog's count)."""
        if self.path is not None:
            try:
                return int(_read(os.path.join(self.path, "pids.current")))
            except (OSError, ValueError):
                return 0
        return _count_tasks(self._live())

    def peak(self) -> int | None:
        """The cgroup's pids.peak (kernels from 6.1 on); None without a cgroup or the file."""
        if self.path is None:
            return None
        try:
            return int(_read(os.path.join(self.path, "pids.peak")))
        except (OSError, ValueError):
            return None

    def _refused(self) -> int:
        """Forks the cgroup refused at its limit (``max`` of pids.events)."""
        try:
            for line in _read(os.path.join(self.path, "pids.events")).splitlines():
                k, _, v = line.partition(" ")
                if k == "max":
                    return int(v)
        except (OSError, ValueError, TypeError):
            pass
        return 0

    def check(self) -> bool:
        """One look (the monitor's): True when the limit was reached (the sandbox is killed and
        :attr:`hit` holds the evidence)."""
        if self.hit is not None or self._released:
            return self.hit is not None
        if self.path is not None:
            refused = self._refused()
            if not refused:
                return False
            ev = {"mechanism": self.mechanism, "limit": self.limit, "refused_forks": refused,
                  "tasks": self.tasks()}
        else:
            n = _count_tasks(self._live())
            if n < self.limit:
                return False
            ev = {"mechanism": "watchdog", "limit": self.limit, "tasks": n}
        self.hit = ev
        self.kill_all()
        return True

    def describe(self) -> str:
        """One line on the hit (empty when none)."""
        if self.hit is None:
            return ""
        how = ("the kernel refused a fork at the cgroup's pids.max" if self.hit["mechanism"] != "watchdog"
               else f"the parent's watchdog counted {self.hit['tasks']} tasks")
        return (f"the sandbox reached its limit of {self.limit} processes/threads ({how}); "
                "the parent killed it")

    # -- ending
    def kill_all(self) -> None:
        """SIGKILL every task of the sandbox: the watched pids and their descendants, and
        everything in the cgroup (v2: cgroup.kill, one write for the whole subtree)."""
        for p in self._live():
            signals.send({p} | procfs.descendants(p), signal.SIGKILL)
        if self.path is None:
            return
        try:
            _write(os.path.join(self.path, "cgroup.kill"), "1")
        except OSError:
            pass
        for _ in range(50):  # v1: no cgroup.kill; a forking process can add one between reads
            try:
                procs = [int(x) for x in _read(os.path.join(self.path, "cgroup.procs")).split()]
            except (OSError, ValueError):
                return
            if not procs:
                return
            for q in procs:
                try:
                    os.kill(q, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def release(self, timeout_s: float = limits.CGROUP_RELEASE_S) -> None:
        """Stop watching, kill what is left in the cgroup and remove it (idempotent). The
        cgroup's rmdir waits for its tasks to be reaped (EBUSY until then)."""
        if self._released:
            return
        self._released = True
        _MONITOR.discard(self)
        if self.path is None:
            return
        retry_pending()
        deadline = time.monotonic() + timeout_s
        while True:
            self.kill_all()
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    # a task of it is not reaped yet (EBUSY): removed once it is, by the next
                    # release, probe or this process's exit (retry_pending)
                    with _lock:
                        _pending.add(self.path)
                    return
                time.sleep(0.02)


def retry_pending() -> list[str]:
    """Remove this process's cgroups whose :meth:`TaskCap.release` timed out, now that their
    tasks may be reaped (SIGKILL again what is still in one). Returns those still left."""
    with _lock:
        paths = list(_pending)
    left = []
    for path in paths:
        try:
            for q in [int(x) for x in _read(os.path.join(path, "cgroup.procs")).split()]:
                try:
                    os.kill(q, signal.SIGKILL)
                except OSError:
                    pass
        except (OSError, ValueError):
            pass
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError:
            left.append(path)
            continue
        with _lock:
            _pending.discard(path)
    return left


def _retry_pending_at_exit() -> None:
    # at exit the harness's children are reaped or about to be: give them a moment
    deadline = time.monotonic() + 2.0
    while retry_pending() and time.monotonic() < deadline:
        time.sleep(0.05)


atexit.register(_retry_pending_at_exit)


def _own_child(pid: int) -> bool:
    """Whether ``pid`` is an unreaped child of this process (ppid is ours; a zombie counts:
    its pid cannot be reused until it is reaped)."""
    return procfs.parent_pid(pid) == os.getpid()


def _count_tasks(pids: list[int]) -> int:
    """Tasks (threads) of ``pids`` and all their descendants, from /proc (num_threads of each
    process's stat, proc(5) field 20)."""
    seen: set[int] = set()
    for p in pids:
        if p not in seen and os.path.exists(f"/proc/{p}"):
            seen.add(p)
            seen |= procfs.descendants(p)
    return sum(procfs.num_threads(p) or 0 for p in seen)


class _Monitor:
    """One daemon thread of the parent that looks at every live TaskCap each
    :data:`WATCHDOG_INTERVAL_S` (a pids.events read per cgroup; a /proc walk per watchdog)."""

    def __init__(self):
        self._caps: set[TaskCap] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, cap: TaskCap) -> None:
        with self._lock:
            self._caps.add(cap)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="solbench-taskcap", daemon=True)
                self._thread.start()

    def discard(self, cap: TaskCap) -> None:
        with self._lock:
            self._caps.discard(cap)

    def _run(self) -> None:
        while True:
            with self._lock:
                caps = list(self._caps)
            for c in caps:
                try:
                    if c.check():
                        self.discard(c)
                except Exception:  # noqa: BLE001 - a vanished /proc entry; look again next time
                    pass
            time.sleep(WATCHDOG_INTERVAL_S)


_MONITOR = _Monitor()
