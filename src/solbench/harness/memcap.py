"""A bound on the host memory of one worker's sandbox (issue 30, item 6).

Without one, a candidate that allocates without end (or fills its tmpfs /tmp and /dev/shm,
which are host RAM) pushes the whole host into the kernel's OOM killer, and the victim may
be the harness, the reference's worker or another user's job.

Mechanisms, strongest first (:func:`probe` says which one this host gets; every trace's
``environment.sandbox["memory"]`` carries it):

- ``cgroup_v2`` / ``cgroup_v1``: a child cgroup of the harness's own in the memory hierarchy,
  ``memory.max`` (v2; ``memory.swap.max`` 0) or ``memory.limit_in_bytes`` (v1; with
  ``memory.memsw.limit_in_bytes`` where swap accounting exists) = the cap
  (Documentation/admin-guide/cgroup-v2.rst, "Memory"; cgroup-v1/memory.rst). The launcher
  joins it before it execs bwrap, so every page the sandbox touches (anonymous memory,
  the tmpfs /tmp and /dev/shm it writes, page cache) is charged to it; past the cap the
  kernel reclaims what it can and then OOM-kills inside that cgroup only, never outside.
  The kill is read back from ``memory.events`` (v2) or ``memory.oom_control`` (v1), both
  counting ``oom_kill``.
- ``rlimit``: where no memory cgroup can be made, the worker sets ``RLIMIT_DATA`` = the cap on
  itself (``sandbox.limits``): private writable mappings and the heap past it fail with
  ENOMEM, which torch reports as an allocation error in the call. Never ``RLIMIT_AS`` on
  CUDA: the driver reserves far more address space than it uses. The tmpfs /tmp and
  /dev/shm of the sandbox are sized at most the cap either way. A resource limit binds
  one process, and a forked child gets a cap of its own (four children held 2.3 caps
  together before this was watched), so the parent's watchdog (the task monitor's thread,
  :data:`~solbench.harness.taskcap.WATCHDOG_INTERVAL_S`) sums the sandbox's anonymous
  memory (proportional set size, :func:`solbench.proc.procfs.anon_bytes`, over the worker's
  process tree), the memfds and shared anonymous mappings the tree holds (each object once,
  the harness's own buffers left out: :meth:`MemCap.held`) and what its private /tmp and
  /dev/shm hold, and kills the sandbox past the cap (``memory_limit``, mechanism
  ``watchdog``). A System V segment, once detached, is held by nothing the watchdog can read:
  the sandbox's seccomp filter refuses ``shmget`` (``sandbox.DENIED_SYSCALLS``).

The status is decided by :mod:`solbench.harness.verdict` from the failure this causes (the
worker died: RUNTIME_ERROR, its reason naming the cap), with the advisory finding
``memory_limit`` carrying the evidence (under ``rlimit``: the allocator's error in the failed call,
:meth:`MemCap.refusal`).

Environment: ``SOLBENCH_SANDBOX_MEM`` = the cap (bytes, or with a K/M/G/T suffix; ``0`` or
``off``: none); default :func:`default_cap`. ``SOLBENCH_SANDBOX_MEM_CGROUP`` = ``auto``
(default) | ``0`` (never make a cgroup: the rlimit alone, for tests and diagnosis).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from typing import Any

from .. import limits, paths
from ..proc.procfs import mem_available
from .taskcap import PREFIX, _own_base, _read, _write, join_argv, probe_cgroup

#: cgroups of this module are named ``<PREFIX>mem-<harness pid>-<n>``
MEM_PREFIX = f"{PREFIX}mem-"
#: share of MemAvailable (read once, at the first worker) one worker may hold by default
DEFAULT_SHARE = 0.5
#: the default cap is never below this (torch alone needs a few hundred MiB)
MIN_DEFAULT_BYTES = 1 << 30
#: the watchdog reads the sandbox's fds and maps (its shmem objects: :meth:`MemCap.held`) at
#: every this-many-th look (every 1 s at the task monitor's 0.1 s)
MAPS_EVERY = 10

#: an allocation the process's RLIMIT_DATA refused, as torch's CPU allocator, CPython and the
#: C library word it (ENOMEM); a CUDA allocator's "out of memory" is device memory, not this cap
_REFUSED = re.compile(r"DefaultCPUAllocator: can't allocate memory|Cannot allocate memory"
                      r"|\bMemoryError\b|\[Errno 12\]")

_lock = threading.Lock()
_probe_cache: dict[str, dict[str, Any]] = {}
_default: list[int] = []
_seq = 0


def parse_bytes(text: str) -> int:
    """``"512M"``, ``"8G"``, ``"1.5G"``, ``"123456"`` -> bytes (binary units). Raises
    ValueError naming the text."""
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = 1
    for i, suffix in enumerate("KMGT"):
        if s.endswith(suffix):
            mult, s = 1 << (10 * (i + 1)), s[:-1]
            break
    try:
        v = float(s) * mult
    except ValueError:
        raise ValueError(f"SOLBENCH_SANDBOX_MEM: {text!r} is not a size (bytes, or 512M, 8G)") from None
    if v < 0:
        raise ValueError(f"SOLBENCH_SANDBOX_MEM: {text!r} is negative")
    return int(v)


def default_cap() -> int:
    """The cap of one worker when ``SOLBENCH_SANDBOX_MEM`` is unset: :data:`DEFAULT_SHARE`
    of MemAvailable when the first worker of this process starts (the candidate's and the
    reference's workers are alive together, so two of them leave the host its other half
    at worst), at least :data:`MIN_DEFAULT_BYTES`. Read once per process, so every worker
    of a run has the same cap."""
    with _lock:
        if not _default:
            avail = mem_available()
            _default.append(max(MIN_DEFAULT_BYTES, int(DEFAULT_SHARE * avail)) if avail else 0)
        return _default[0]


def cap_bytes() -> int:
    """The memory cap of one worker in bytes (0: none). Raises ValueError on a bad
    ``SOLBENCH_SANDBOX_MEM``."""
    env = paths.sandbox_mem_setting()
    if env is not None:
        if env.strip().lower() in ("off", "none", "no"):
            return 0
        return parse_bytes(env)
    return default_cap()


def gib(n: int) -> str:
    """``n`` bytes as ``"1.5 GiB"`` / ``"512 MiB"``."""
    return f"{n / (1 << 30):.3g} GiB" if n >= (1 << 30) else f"{n / (1 << 20):.3g} MiB"


def _base() -> tuple[str | None, str | None, str]:
    """(kind, directory, why): where this process may make memory cgroups, or why not."""
    return _own_base("memory", "memory.limit_in_bytes")


def _limit_files(kind: str) -> list[tuple[str, bool]]:
    """(file, required) written with the cap, in order: v1 needs memory.limit_in_bytes set
    before memory.memsw.limit_in_bytes (which must stay >= it)."""
    if kind == "cgroup_v2":
        return [("memory.max", True), ("memory.swap.max", False)]
    return [("memory.limit_in_bytes", True), ("memory.memsw.limit_in_bytes", False)]


def _set_limit(path: str, kind: str, cap: int) -> None:
    for name, required in _limit_files(kind):
        value = "0" if name == "memory.swap.max" else str(cap)
        try:
            _write(os.path.join(path, name), value)
        except OSError:
            if required:
                raise


def probe(refresh: bool = False) -> dict[str, Any]:
    """Can this process make a memory cgroup for a worker? Makes one, joins a shell to it and
    removes it (cached; :func:`~solbench.harness.taskcap.probe_cgroup`). ``{"mechanism":
    "cgroup_v2"|"cgroup_v1"|"rlimit", "base": dir|None, "reason": why no cgroup ("" when
    there is one)}``."""
    return probe_cgroup(paths.SANDBOX_MEM_CGROUP, paths.sandbox_mem_cgroup(), "memory", "memory.limit_in_bytes", MEM_PREFIX,
                        "rlimit", lambda path, kind: _set_limit(path, kind, 256 << 20),
                        _probe_cache, _lock, refresh)


def status() -> dict[str, Any]:
    """The memory bound of a worker on this host, for the trace: ``{"cap_bytes": N (0: none),
    "bound_by": "cgroup_v2 memory.max" | "cgroup_v1 memory.limit_in_bytes" | "RLIMIT_DATA" |
    None, "cgroup_unavailable": str|None}``."""
    cap = cap_bytes()
    if not cap:
        return {"cap_bytes": 0, "bound_by": None, "cgroup_unavailable": None}
    p = probe()
    by = {"cgroup_v2": "cgroup_v2 memory.max", "cgroup_v1": "cgroup_v1 memory.limit_in_bytes"}
    return {"cap_bytes": cap, "bound_by": by.get(p["mechanism"], "RLIMIT_DATA"),
            "cgroup_unavailable": p["reason"] or None}


def uses_rlimit() -> bool:
    """Whether the worker must bound itself with RLIMIT_DATA (a cap, and no cgroup here)."""
    return bool(cap_bytes()) and probe()["mechanism"] == "rlimit"


# ------------------------------------------------------------------ one worker's bound
class MemCap:
    """The memory bound of one worker's sandbox (made before the worker is launched).

    Use: ``cmd = cap.wrap(cmd)`` before the spawn; ``cap.oom_kills()`` / :meth:`hit` after
    the worker died; ``cap.release()`` after it is killed. ``mechanism`` is ``cgroup_v2``,
    ``cgroup_v1``, ``rlimit`` (the worker bounds itself) or ``none`` (no cap)."""

    def __init__(self, cap: int | None = None):
        global _seq
        self.cap = int(cap if cap is not None else cap_bytes())
        self.path: str | None = None
        self.reason: str | None = None
        self._released = False
        self._final: dict[str, Any] | None = None
        self._pids: list[int] = []  # watched launchers (rlimit only)
        self._watch_hit: dict[str, Any] | None = None
        self._looks = 0
        if not self.cap:
            self.mechanism = "none"
            return
        p = probe()
        self.mechanism = p["mechanism"]
        self.reason = p["reason"] or None
        if p["base"] is None:
            return
        with _lock:
            _seq += 1
            n = _seq
        path = os.path.join(p["base"], f"{MEM_PREFIX}{os.getpid()}-{n}")
        try:
            os.mkdir(path)
            _set_limit(path, self.mechanism, self.cap)
            self.path = path
        except OSError as e:
            try:
                os.rmdir(path)
            except OSError:
                pass
            self.mechanism = "rlimit"
            self.reason = f"could not make {path}: {e}"

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` launched by a shell that first moves itself into the cgroup, then execs it."""
        return list(argv) if self.path is None else join_argv(self.path, argv)

    def watch(self, *pids: int) -> None:
        """Start the parent's watchdog where the cap is a per-process resource limit
        (``rlimit``: module doc): ``pids`` are launched processes (children of this process)
        whose trees make the sandbox. A no-op under a cgroup (the kernel charges the tree)
        or without a cap."""
        if self.mechanism != "rlimit" or not self.cap:
            return
        from .taskcap import _MONITOR, _own_child

        self._pids = [p for p in pids if p and _own_child(p)]
        _MONITOR.add(self)

    def held(self, proportional: bool = True, maps: bool | None = None) -> tuple[int, dict[str, int]]:
        """What the watched sandbox holds now, in bytes: (total, {"anon", "shmem", "tmpfs"}):
        the anonymous memory of every process of its tree and what its private /tmp and
        /dev/shm hold (read through a process of it whose root is not ours). ``proportional``
        False: each process's RssAnon instead of its Pss_Anon, an upper bound read without
        walking page tables. ``maps`` (default: ``proportional``) False: each process's
        RssShmem in place of the shmem objects it holds, read without its fds and maps (what
        it has faulted in: an unmapped memfd, or pages no live process of the tree has
        faulted in, such as a forked child's that exited, are seen only with ``maps``).
        ``"shmem"``: the memfds, shared anonymous mappings and System V segments of the tree
        (:func:`solbench.proc.procfs.shmem_objects`), the harness's own buffers
        (:data:`solbench.harness.shm.OWN_INODES`) left out."""
        from ..proc import procfs
        from . import shm
        from .taskcap import _own_child

        tree: set[int] = set()
        for p in self._pids:
            if _own_child(p):
                tree |= {p} | procfs.descendants(p)
        # memfds, shared anonymous mappings and System V segments: neither anonymous nor in
        # the two tmpfs, nor bound by RLIMIT_DATA (a shared mapping, or none at all); each
        # object once, the harness's own buffers (which a cgroup charges to the parent) left
        # out. Without ``maps``: each process's RssShmem (the shmem pages it has faulted in,
        # the harness's buffers included) stands for them, read without its fds or maps
        read_maps = proportional if maps is None else maps
        anon = shmem = 0
        objects: dict[int, int] = {}
        shm_dev = procfs.shm_dev()
        for p in tree:
            if proportional:
                anon += procfs.anon_bytes(p)
            else:
                rss = procfs.status_bytes(p, ("RssAnon", "RssShmem"))
                anon += rss["RssAnon"]
                if not read_maps:
                    shmem += rss["RssShmem"]
            if read_maps:
                objects.update(procfs.shmem_objects(p, shm_dev))
        own = shm.OWN_INODES
        shmem += sum(v for k, v in objects.items() if k not in own)
        tmpfs, mounts = 0, set()
        for p in sorted(tree):
            try:
                if os.stat(f"/proc/{p}/root").st_ino == os.stat("/").st_ino:
                    continue  # not inside the sandbox's mount namespace (the launcher)
            except OSError:
                continue
            for d in ("tmp", "dev/shm"):
                path = f"/proc/{p}/root/{d}"
                try:
                    dev = os.stat(path).st_dev
                except OSError:
                    continue
                if dev not in mounts:
                    mounts.add(dev)
                    tmpfs += procfs.tmpfs_used_bytes(path)
            break  # one process of the sandbox shows its mounts
        return anon + shmem + tmpfs, {"anon": anon, "shmem": shmem, "tmpfs": tmpfs}

    def check(self) -> bool:
        """One look of the watchdog (the task monitor's thread): True when the sandbox held
        more than the cap; it is killed then, and :meth:`hit` holds the evidence."""
        if self._watch_hit is not None or self._released:
            return self._watch_hit is not None
        # RssAnon >= Pss_Anon: under the cap without the page-table walk of smaps_rollup,
        # which this thread would otherwise repeat every look while candidates are timed. The
        # shmem objects are read through the fds and maps at every MAPS_EVERY-th look (a
        # maps read costs about 0.5 ms for a worker with torch, and a candidate can make
        # both longer with more mappings, fds and processes), and in between stood for by
        # what the processes have faulted in (RssShmem, the harness's mapped buffers
        # included: past the cap, the fds and maps decide)
        look, self._looks = self._looks, self._looks + 1
        if look % MAPS_EVERY and self.held(proportional=False, maps=False)[0] <= self.cap:
            return False
        if self.held(proportional=False, maps=True)[0] <= self.cap:
            return False
        total, parts = self.held()
        if total <= self.cap:
            return False
        from ..proc import procfs, signals
        from .taskcap import _own_child

        self._watch_hit = {"mechanism": "watchdog", "cap_bytes": self.cap, "held_bytes": total, **{
            f"{k}_bytes": v for k, v in parts.items()}}
        for p in self._pids:
            if _own_child(p):
                signals.send({p} | procfs.descendants(p), signal.SIGKILL)
        return True

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer ended inside this cgroup (0 without one)."""
        if self.path is None:
            return 0
        name = "memory.events" if self.mechanism == "cgroup_v2" else "memory.oom_control"
        try:
            for line in _read(os.path.join(self.path, name)).splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def peak(self) -> int | None:
        """Most bytes charged at once (v2 memory.peak, v1 memory.max_usage_in_bytes)."""
        if self.path is None:
            return None
        name = "memory.peak" if self.mechanism == "cgroup_v2" else "memory.max_usage_in_bytes"
        try:
            return int(_read(os.path.join(self.path, name)))
        except (OSError, ValueError):
            return None

    def hit(self) -> dict[str, Any] | None:
        """The evidence when the cap was reached and the kernel killed in the sandbox, else
        None: ``{"mechanism", "cap_bytes", "oom_kills", "peak_bytes"}`` (kept from the
        moment of :meth:`release`, which removes the cgroup)."""
        if self._released:
            return self._final
        if self._watch_hit is not None:
            return dict(self._watch_hit)
        n = self.oom_kills()
        if not n:
            return None
        return {"mechanism": self.mechanism, "cap_bytes": self.cap, "oom_kills": n, "peak_bytes": self.peak()}

    def refusal(self, reason: str) -> dict[str, Any] | None:
        """Under the ``rlimit`` mechanism no kernel counter records a hit: the bound shows as
        the allocation that failed inside the call. The evidence when ``reason`` (a failed
        call's message, from the worker) holds such a refusal, else None (always None under a
        cgroup, whose hit :meth:`hit` reads from the kernel). The text is the candidate's
        process's, so it backs only an advisory finding and a clearer reason, never a
        status."""
        if self.mechanism != "rlimit" or not self.cap or self.hit() is not None:
            return None  # a watchdog kill is named by hit() already
        m = _REFUSED.search(reason or "")
        if m is None:
            return None
        return {"mechanism": "rlimit", "cap_bytes": self.cap, "error": m.group(0)}

    def describe_refusal(self) -> str:
        """One line on an allocation refused at the cap (see :meth:`refusal`)."""
        return (f"an allocation was refused at the worker's memory cap of {gib(self.cap)} "
                f"(RLIMIT_DATA: no memory cgroup on this host)")

    def describe(self) -> str:
        """One line on the hit (empty when none)."""
        ev = self.hit()
        if ev is None:
            return ""
        if ev["mechanism"] == "watchdog":
            return (f"the sandbox exceeded its memory cap of {gib(self.cap)} (the parent's watchdog saw "
                    f"{gib(ev['held_bytes'])}: {gib(ev['anon_bytes'])} anonymous over its processes, "
                    f"{gib(ev.get('shmem_bytes', 0))} in memfds and shared mappings, "
                    f"{gib(ev['tmpfs_bytes'])} in its /tmp and /dev/shm) and killed it")
        # "the sandbox": the process the kernel ended may be a child of the worker's
        return (f"the sandbox exceeded its memory cap of {gib(self.cap)} (the kernel's OOM killer "
                f"ended {ev['oom_kills']} process(es) in its {self.mechanism} memory cgroup)")

    def release(self, timeout_s: float = limits.CGROUP_RELEASE_S) -> None:
        """Kill what is left in the cgroup and remove it (idempotent). Pages it still holds
        (tmpfs files of a dead mount namespace are freed with it) move to the parent cgroup."""
        if self._released:
            return
        self._final = self.hit()
        self._released = True
        from .taskcap import _MONITOR

        _MONITOR.discard(self)
        if self.path is None:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                procs = [int(x) for x in _read(os.path.join(self.path, "cgroup.procs")).split()]
            except (OSError, ValueError):
                procs = []
            for q in procs:
                try:
                    os.kill(q, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # a task not reaped yet: removed by a later harness (_clean_stale)
            time.sleep(0.02)
