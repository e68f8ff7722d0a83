"""Reads of Linux's ``/proc`` (proc(5)): process state, threads, children, command lines,
scheduler statistics, memory.

Every function here is a plain read: none raises for a process that is gone or a file that
cannot be read (it returns None, an empty set or an empty string instead), since a process
can exit between any two reads. The scans run thousands of times a workload (every thread's
``stat`` and ``children`` file, around every timed call), so files are read with raw
``os.read`` calls: pathlib's ``read_text`` took about 3x as long per file
(bench/results/overhead_cpu_before.md).

Field numbers below are proc(5)'s, 1-based: ``pid (comm) state ppid pgrp session ...``.
"""

from __future__ import annotations

import os
import re

#: clock ticks per second of the ``utime``/``stime`` fields (100 on Linux: 10 ms a tick)
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_text(path: str) -> str | None:
    """The whole text of a /proc file, read with raw reads until end of file and decoded
    with replacement (a command name is any bytes); None when it cannot be opened or read."""
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


def read_bytes(path: str) -> bytes | None:
    """The whole content of a /proc file (raw reads until end of file); None when it cannot
    be opened or read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        parts = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            parts.append(b)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(parts)


def parse_stat(text: str) -> list[str] | None:
    """The fields of a ``stat`` line after the command name: ``[state, ppid, pgrp, session,
    ...]`` (proc(5) fields 3 on, so proc(5) field ``n`` is index ``n - 3``). The command
    name (field 2) is any 16 bytes in parentheses, ``)`` and spaces included, so the split
    is at the *last* ``)``. None for an empty or malformed line."""
    i = text.rfind(")")
    if i < 0:
        return None
    return text[i + 2:].split() or None


def stat_fields(pid: int, tid: int | None = None) -> list[str] | None:
    """:func:`parse_stat` of ``/proc/<pid>/stat`` (or of thread ``tid``'s
    ``/proc/<pid>/task/<tid>/stat``); None when it is gone."""
    txt = read_text(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat")
    return None if txt is None else parse_stat(txt)


def _field(pid: int, index: int) -> int | None:
    f = stat_fields(pid)
    try:
        return int(f[index]) if f and len(f) > index else None
    except ValueError:
        return None


def state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (field 3: R running, S sleeping, D disk wait,
    T stopped, t traced, Z zombie, X dead); None when it is gone."""
    f = stat_fields(pid)
    return f[0] if f else None


def parent_pid(pid: int) -> int | None:
    """The parent's pid (field 4); None when it is gone."""
    return _field(pid, 1)


def session_id(pid: int) -> int | None:
    """The session id of ``pid`` (field 6); None when it is gone."""
    return _field(pid, 3)


def num_threads(pid: int) -> int | None:
    """Threads of ``pid`` (field 20, ``num_threads``); None when it is gone."""
    return _field(pid, 17)


def last_cpu(pid: int) -> int | None:
    """The CPU ``pid`` (its main thread) last ran on (field 39, ``processor``); None when it
    is gone or the field is missing."""
    return _field(pid, 36)


def process_cpu_ms(pid: int) -> float | None:
    """CPU time (ms) process ``pid`` has used: user + system time of all its threads, the
    exited ones included, and of its children it has waited for (fields 14-17: utime, stime,
    cutime, cstime, in ticks of 1/:data:`CLK_TCK` s). A loaded host stretches a process's
    wall time, never its CPU time. None when the process is gone."""
    f = stat_fields(pid)
    try:
        return sum(int(x) for x in f[11:15]) * 1e3 / CLK_TCK if f and len(f) >= 15 else None
    except ValueError:
        return None


def is_zombie(pid: int) -> bool:
    """Has ``pid`` exited without being reaped (state Z)?"""
    return state(pid) == "Z"


def gone(pid: int) -> bool:
    """Has ``pid`` stopped running: no longer listed, a zombie or dead (state Z/X) with no
    live thread left, or past the point of its exit where its address space is released
    (field 23, ``vsize``, 0)?

    Why not an empty ``/proc/<pid>/cmdline``: a live process can make it read empty by
    unmapping the pages of its stack that hold its argv and environment strings (red team
    24, tests/harness/cand_red24_blank_cmdline.py), so "no command line" is no proof that
    it exited."""
    f = stat_fields(pid)
    if not f:
        return True
    if f[0] in ("Z", "X"):
        # a zombie leader whose other threads still live (running or stopped) has not
        # exited: its main thread did (docs/integrity.md, the disguised reference stoppers)
        for tid in thread_ids(pid):
            g = stat_fields(pid, tid)
            if g and g[0] not in ("Z", "X"):
                return False
        return True
    try:
        return len(f) > 20 and int(f[20]) == 0
    except ValueError:
        return False


def thread_ids(pid: int) -> set[int]:
    """OS thread ids of process ``pid`` (``/proc/<pid>/task``; empty when it is gone)."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def running_tasks(pid: int) -> list[str]:
    """States of the threads of ``pid`` that can run (not stopped, traced, zombie or dead),
    read from every ``/proc/<pid>/task/*/stat``: a process whose main thread exited (a zombie
    leader) still runs its other threads."""
    out = []
    for tid in thread_ids(pid):
        f = stat_fields(pid, tid)
        if f and f[0] not in "TtZX":
            out.append(f[0])
    return out


def child_pids(pid: int) -> set[int]:
    """Direct child processes of ``pid`` (``/proc/<pid>/task/*/children``: a child belongs
    to the thread that forked it, so every thread's file is read)."""
    out: set[int] = set()
    for tid in thread_ids(pid):
        txt = read_text(f"/proc/{pid}/task/{tid}/children")
        if txt:
            out.update(int(x) for x in txt.split())
    return out


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, their children, ...), by the children files.
    A process that is re-parented away (a double fork under another subreaper, or init) is
    no longer below it."""
    seen: set[int] = set()
    stack = [pid]
    while stack:
        for c in child_pids(stack.pop()):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def pid_cursor() -> int | None:
    """The last process id the kernel handed out in this process's pid namespace (the fifth
    field of ``/proc/loadavg``, proc(5)); None when it cannot be read.

    Every new task, process or thread, takes an id in its own pid namespace *and in every
    ancestor one* (``alloc_pid`` in kernel/pid.c), so a process started anywhere below this
    one, a sandbox's nested namespace included, moves this cursor. The one exception is a
    caller that picks its own id (``clone3`` with ``set_tid``), which needs
    CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN over the user namespace owning this namespace:
    see :func:`pid_cursor_moves` and ``harness.evidence.process_check``."""
    m = task_mark()
    return None if m is None else m[0]


def task_mark() -> tuple[int, int] | None:
    """(the pid cursor, the number of tasks on the host) from one read of ``/proc/loadavg``
    (its fifth field, and the total after the ``/`` of its fourth; proc(5)); None when it
    cannot be read. The count falls when a task is released (a thread at its exit, a process
    when it is reaped), so two equal marks around a walk of ``children`` files mean that no
    task was made or reaped meanwhile: no process was re-parented during the walk by the
    exit and reaping of its parent (see ``harness.evidence.process_check``)."""
    data = read_bytes("/proc/loadavg")
    try:
        f = data.split()
        return int(f[4]), int(f[3].split(b"/")[1])
    except (AttributeError, IndexError, ValueError):
        return None


_CURSOR_MOVES: list[bool] = []


def pid_cursor_moves() -> bool:
    """Whether :func:`pid_cursor` moves when a task is created here: checked once per
    process by starting and joining a thread between two reads (an emulated /proc, e.g. a
    user-space kernel, may print a fixed or zero value there)."""
    if not _CURSOR_MOVES:
        import threading

        a = pid_cursor()
        t = threading.Thread(target=lambda: None, name="solbench-pid-cursor-check")
        t.start()
        t.join()
        b = pid_cursor()
        _CURSOR_MOVES.append(a is not None and b is not None and a > 0 and b != a)
    return _CURSOR_MOVES[0]


def cmdline(pid: int) -> str:
    """The command line of ``pid``, arguments joined by spaces ("" when gone, or a zombie).
    The process writes its own argv: it proves nothing about the program (:func:`exe_name`)."""
    data = read_bytes(f"/proc/{pid}/cmdline")
    return "" if not data else data.replace(b"\0", b" ").decode(errors="replace")


_TRIPLE = re.compile(r"^(x86_64|aarch64|i686|powerpc64le)-[a-z0-9_]+-[a-z0-9_]+-")
_VERSION = re.compile(r"-\d+(\.\d+)*$")


def exe_name(pid: int) -> str | None:
    """Basename of the executable a process really runs (``/proc/<pid>/exe``; argv[0] is
    the process's own choice and proves nothing), with a target-triple prefix and a version
    suffix removed (``x86_64-linux-gnu-gcc-12`` -> ``gcc``). None when unreadable."""
    try:
        base = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None
    return _VERSION.sub("", _TRIPLE.sub("", base))


def tracer_pid(pid: int) -> int:
    """The pid of the process tracing ``pid`` (ptrace), from ``TracerPid:`` of
    ``/proc/<pid>/status``; 0 when none or unreadable."""
    txt = read_text(f"/proc/{pid}/status") or ""
    for line in txt.splitlines():
        if line.startswith("TracerPid:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return 0
    return 0


def has_env(pid: int, entry: bytes) -> bool:
    """Whether the environment block of ``pid`` (``/proc/<pid>/environ``, as it was at its
    exec, or as it rewrote it) holds ``entry`` (``b"NAME=value"``) exactly. False when
    unreadable (another user's process, gone)."""
    data = read_bytes(f"/proc/{pid}/environ")
    return data is not None and entry in data.split(b"\0")


def all_pids() -> list[int]:
    """Every process visible in /proc (this pid namespace)."""
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


def fd_target(pid: int, fd: int) -> str | None:
    """``readlink /proc/<pid>/fd/<fd>`` (``"socket:[inode]"`` for a socket); None when the fd
    is closed. Raises PermissionError when /proc of ``pid`` cannot be read,
    ProcessLookupError when the process is gone."""
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except FileNotFoundError:
        if not os.path.exists(f"/proc/{pid}"):
            raise ProcessLookupError(pid) from None
        return None


def sched_state(pid: int) -> dict[int, tuple]:
    """Per OS thread of ``pid``: (scheduling policy, nice value, CPU affinity as a sorted
    tuple). Threads that vanish while being read are left out."""
    out: dict[int, tuple] = {}
    for tid in thread_ids(pid):
        try:
            out[tid] = (os.sched_getscheduler(tid), os.getpriority(os.PRIO_PROCESS, tid),
                        tuple(sorted(os.sched_getaffinity(tid))))
        except OSError:
            continue
    return out


def _schedstat_field(path: str, index: int) -> int | None:
    """Field ``index`` of a schedstat file (0: ns on a CPU, 1: ns waiting for one), None
    when it cannot be read."""
    txt = read_text(path)
    try:
        return int(txt.split()[index]) if txt else None
    except (IndexError, ValueError):
        return None


def _schedstat_wait_ms(path: str) -> float | None:
    ns = _schedstat_field(path, 1)
    return None if ns is None else ns / 1e6


def runqueue_wait_ms(pid: int | None = None) -> float | None:
    """Milliseconds the main thread of ``pid`` (``None``: the calling thread) has spent
    runnable but waiting for a CPU since it started: the second field of
    ``/proc/<pid>/task/<pid>/schedstat`` (``/proc/thread-self/schedstat``), in nanoseconds
    (Linux, Documentation/scheduler/sched-stats.rst). It grows only while the thread could
    run and another task held its CPU: the host's load, not the thread's own work or sleep.
    None where the kernel keeps no such statistics (CONFIG_SCHED_INFO off) or the thread
    is gone."""
    return _schedstat_wait_ms("/proc/thread-self/schedstat" if pid is None
                              else f"/proc/{pid}/task/{pid}/schedstat")


def thread_run_ns(pid: int, tid: int) -> int | None:
    """Nanoseconds thread ``tid`` of process ``pid`` has spent on a CPU since it started: the
    first field of ``/proc/<pid>/task/<tid>/schedstat`` (Linux,
    Documentation/scheduler/sched-stats.rst), kept by the kernel, so the thread cannot set
    it. None when the thread is gone or the kernel keeps no such statistics."""
    return _schedstat_field(f"/proc/{pid}/task/{tid}/schedstat", 0)


def thread_wait_ms(tid: int) -> float | None:
    """:func:`runqueue_wait_ms` of thread ``tid`` of this process (ms; None when the thread
    is gone or the kernel keeps no such statistics)."""
    return _schedstat_wait_ms(f"/proc/self/task/{tid}/schedstat")


def process_wait_ms(pid: int | None) -> float | None:
    """Milliseconds the threads of process ``pid`` (``None``: the calling thread only) have
    spent runnable but waiting for a CPU: the sum of the second field of every
    ``/proc/<pid>/task/*/schedstat``. Every thread counts, not only the main one: a torch
    intra-op pool whose threads wait for a CPU stretches a call while its main thread spins
    at a barrier. Exited threads no longer count. None where the kernel keeps no such
    statistics or the process is gone."""
    if pid is None:
        return runqueue_wait_ms(None)
    total, seen = 0.0, False
    for tid in thread_ids(pid):
        ms = _schedstat_wait_ms(f"/proc/{pid}/task/{tid}/schedstat")
        if ms is not None:
            total += ms
            seen = True
    return total if seen else None


def cpu_model(text: str | None = None) -> str | None:
    """The CPU's model name (the first ``model name`` line of /proc/cpuinfo, x86; ``Model`` or
    ``CPU part`` lines elsewhere), or None where it is not given. ``text``: cpuinfo's content
    (None: read it)."""
    text = read_text("/proc/cpuinfo") if text is None else text
    for key in ("model name", "Model", "Hardware", "cpu model"):
        for line in (text or "").splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return " ".join(value.split())
    return None


def mem_available() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (the kernel's estimate of memory a new
    workload can take without swapping; proc(5)); None when unreadable."""
    for line in (read_text("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def resident_bytes(pid: int | str = "self") -> int:
    """Resident bytes of ``pid`` (field 2 of ``/proc/<pid>/statm``, in pages); 0 where
    unreadable."""
    txt = read_text(f"/proc/{pid}/statm")
    try:
        return int(txt.split()[1]) * os.sysconf("SC_PAGE_SIZE") if txt else 0
    except (IndexError, ValueError):
        return 0


def anon_bytes(pid: int) -> int:
    """Anonymous memory ``pid`` holds, in bytes: ``Pss_Anon`` of ``/proc/<pid>/smaps_rollup``
    (proportional: a page a forked child still shares with its parent counts half in each,
    so a process tree's sum is what it holds), else :func:`rss_anon_bytes` (kernels before
    5.9; a shared page then counts in each). 0 where unreadable (gone). Reading smaps_rollup
    walks the process's page tables; :func:`rss_anon_bytes` is a counter read."""
    for line in (read_text(f"/proc/{pid}/smaps_rollup") or "").splitlines():
        if line.startswith("Pss_Anon:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return 0
    return rss_anon_bytes(pid)


def status_bytes(pid: int, names: tuple[str, ...]) -> dict[str, int]:
    """The ``kB`` fields ``names`` of ``/proc/<pid>/status`` (one read), in bytes; a field
    missing or unreadable (the process gone) is 0."""
    out = dict.fromkeys(names, 0)
    for line in (read_text(f"/proc/{pid}/status") or "").splitlines():
        key, _, rest = line.partition(":")
        if key in out:
            try:
                out[key] = int(rest.split()[0]) * 1024
            except (IndexError, ValueError):
                pass
    return out


def rss_anon_bytes(pid: int) -> int:
    """``RssAnon`` of ``/proc/<pid>/status`` in bytes: the anonymous pages ``pid`` maps, a page
    shared with a forked relative counted in each, so never less than :func:`anon_bytes`.
    0 where unreadable (gone)."""
    return status_bytes(pid, ("RssAnon",))["RssAnon"]


_SHM_DEV: list[int] = []


def shm_dev() -> int | None:
    """The device number of the kernel's internal shmem mount, where every memfd, shared
    anonymous mapping (``mmap(-1, n, MAP_SHARED)``) and System V segment keeps its pages
    (mm/shmem.c: ``shmem_file_setup``, ``shmem_zero_setup``, ``shmem_kernel_file_setup``):
    read once from a memfd of this process's own. None where memfds do not exist."""
    if not _SHM_DEV:
        try:
            fd = os.memfd_create("solbench-shm-dev", os.MFD_CLOEXEC)
        except (AttributeError, OSError):
            return None
        try:
            _SHM_DEV.append(os.fstat(fd).st_dev)
        finally:
            os.close(fd)
    return _SHM_DEV[0]


def shmem_objects(pid: int, dev: int | None = None) -> dict[int, int]:
    """The objects of the internal shmem mount (:func:`shm_dev`) that ``pid`` holds, by inode:
    ``{inode: bytes allocated to it}``, through its open fds (a memfd written and never
    mapped) and its mappings (a shared anonymous mapping, a mapped memfd, an attached
    System V segment). An object's bytes are its ``st_blocks`` x 512 (its pages, wherever
    they are mapped), read with ``stat`` through ``/proc/<pid>/fd/N`` or
    ``/proc/<pid>/map_files/<range>`` (proc(5); the second needs CAP_SYS_ADMIN: a mapping it
    cannot read is not counted). Reads the fd table and the maps file, never the page
    tables. Empty where unreadable (gone)."""
    dev = shm_dev() if dev is None else dev
    out: dict[int, int] = {}
    if dev is None:
        return out
    base = f"/proc/{pid}"

    def held(path: str) -> None:
        # the object behind an fd or a mapping, when it lives on the shmem mount
        try:
            st = os.stat(path)
        except OSError:
            return
        if st.st_dev == dev:
            out[st.st_ino] = st.st_blocks * 512

    try:
        fds = os.listdir(f"{base}/fd")
    except OSError:
        fds = []
    for n in fds:
        held(f"{base}/fd/{n}")
    # "start-end perms offset major:minor inode path", the device in hex (proc(5)); found
    # with str.find (a line-anchored regex over a worker's maps costs more than reading them)
    text = read_text(f"{base}/maps") or ""
    tag = f" {os.major(dev):02x}:{os.minor(dev):02x} "
    at = text.find(tag)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        fields = text[start:end if end >= 0 else len(text)].split(None, 5)
        at = text.find(tag, at + len(tag))
        try:
            ino = int(fields[4])
        except (IndexError, ValueError):
            continue
        if ino not in out:
            held(f"{base}/map_files/{fields[0]}")
    return out


def tmpfs_used_bytes(path: str) -> int:
    """Bytes in use on the file system at ``path`` (``statvfs``: blocks less free blocks);
    0 where unreadable."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize
