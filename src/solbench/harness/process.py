"""Parent-side handle on one worker process (spawn, request/reply with timeouts, logs)."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import tempfile
import threading
import time
import weakref
from typing import Any

from .. import limits
from ..proc import procfs, signals
from ..proc.registry import OWN
from .memcap import MemCap
from .protocol import ProtocolError
from .taskcap import TaskCap
from . import sandbox as _sandbox

#: largest reply the parent accepts from a worker (bytes of JSON)
MAX_REPLY_BYTES = 16 << 20
#: most seconds the parent waits to hand one request (and its buffers' fds) to a worker;
#: an honest worker is blocked reading its channel, so a send that waits at all means the
#: other end stopped reading (the rest of the request's limit is for the reply)
SEND_TIMEOUT_S = 10.0
#: ops after whose reply every fd of the worker is read (the other replies: its two channel
#: fds only, about 20 us)
FULL_CHANNEL_CHECK_OPS = frozenset({"build", "load", "guards", "time_end"})
#: the harness's own ops (no candidate call inside): with ``--timeout`` their limits are
#: capped at the larger of that limit and HARNESS_OP_FLOOR_S (:meth:`WorkerHandle.cap_harness_ops`)
CAPPED_OPS = frozenset({"ping", "load", "noop", "guards", "time_begin"})
HARNESS_OP_FLOOR_S = 10.0


#: the one registry of this process's own children (workers, helpers, the children older
#: than the first worker): :mod:`solbench.proc.registry`. The names below are its parts under
#: the names the harness's callers and tests know: the live workers' pids (anything else the
#: parent adopts is a stray); the lock held while a worker or helper is spawned and
#: registered, and while strays are listed, so a worker started on another thread (the
#: reference worker, started beside the candidate's) is never seen between its fork and its
#: registration; and the registry itself, as the ``registry`` of
#: :class:`solbench.sol.isolated.CountingChild` (``add(pid)``: a helper killed at shutdown).
LIVE_WORKERS: set[int] = OWN.workers
_SPAWN_LOCK = OWN.lock
HARNESS_HELPERS = OWN


#: every WorkerHandle not yet killed (shutdown_all ends them all)
_HANDLES: "weakref.WeakSet[WorkerHandle]" = weakref.WeakSet()
_SHUTTING_DOWN = False


class _Spawner:
    """Starts every worker from one long-lived thread. Linux sends a PR_SET_PDEATHSIG signal
    (bwrap's --die-with-parent) when the *thread* that forked the child exits, so a worker
    started from a short-lived thread (the reference worker is started beside the
    candidate's) would be killed with that thread; this thread lives as long as the process."""

    def __init__(self):
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _run(self) -> None:
        import subprocess

        while True:
            argv, kw, box, done = self._q.get()
            try:
                box["proc"] = subprocess.Popen(argv, **kw)
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box["err"] = e
            done.set()

    def popen(self, argv: list[str], **kw):
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="solbench-spawner", daemon=True)
                self._thread.start()
        box: dict = {}
        done = threading.Event()
        self._q.put((argv, kw, box, done))
        done.wait()
        if "err" in box:
            raise box["err"]
        return box["proc"]


_SPAWNER = _Spawner()


def _spawn(argv: list[str], env: dict, pass_fds: list[int]):
    import subprocess

    return _SPAWNER.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env=env, pass_fds=pass_fds,
                          start_new_session=True)  # own process group: kill takes its children


def _read_child_pid(fd: int, timeout_s: float, proc) -> int | None:
    """The worker's pid (as this process sees it) from bwrap's --info-fd JSON; None when
    bwrap exits or stays silent for ``timeout_s``."""
    import select

    buf = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.25)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
            try:
                return int(json.loads(buf)["child-pid"])
            except (ValueError, KeyError, TypeError):
                continue
        elif proc.poll() is not None:
            break
    try:
        return int(json.loads(buf)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def shutdown_all() -> int:
    """Kill and reap every worker of this process (and whatever a candidate left re-parented
    here, and the helpers not flagged to survive), and refuse new ones: for the CLI's
    SIGTERM/SIGHUP handler, so solbench leaves nothing behind when it is stopped. Children
    older than the first worker and ``survive`` helpers (the CLI's watchdog) are left alone.
    Returns how many workers were killed. Safe to call from a signal handler on the main
    thread."""
    global _SHUTTING_DOWN
    _SHUTTING_DOWN = True
    handles = list(_HANDLES)
    for h in handles:
        try:
            h.kill()
        except Exception:  # noqa: BLE001
            pass
    signals.send(sorted(OWN.workers), signal.SIGKILL)
    for pid in sorted(procfs.child_pids(os.getpid()) - OWN.spared_at_shutdown()):
        if signals.send([pid], signal.SIGKILL):
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    return len(handles)


def reopen() -> None:
    """Let this process start workers again after :func:`shutdown_all`: for a long-lived
    caller (``solbench serve``'s Service) that ended its own running evaluations and goes on
    living (a library user's process, a test session). Call it only once every thread that was
    evaluating has returned, or a late one would start workers after the shutdown."""
    global _SHUTTING_DOWN
    _SHUTTING_DOWN = False


def become_subreaper() -> None:
    """Make this process the Linux child subreaper, once, after recording the children it
    already has (:meth:`OwnProcesses.mark_baseline <solbench.proc.registry.OwnProcesses.mark_baseline>`),
    so a candidate's double-forked, setsid'd daemon is re-parented here instead of to init,
    where :func:`stray_children` can see and kill it. No-op where prctl is unavailable."""
    with OWN.lock:
        if OWN.mark_baseline():
            signals.become_subreaper()


def stray_children(unregistered: list[int] | None = None) -> list[dict[str, Any]]:
    """Children of this process that are neither workers, nor registered helpers, nor older
    than the first worker, nor runtime helpers (:func:`~.guards._allowed`, judged by the real
    executable): processes a candidate left behind (re-parented to us). ``unregistered``:
    :func:`unregistered_children` when the caller has just read it."""
    from .guards import _allowed

    out = []
    for c in (unregistered_children() if unregistered is None else unregistered):
        cmd = procfs.cmdline(c)
        # an empty command line is a process gone, or one that blanked it (procfs.gone)
        if (cmd or not procfs.gone(c)) and not _allowed(cmd, procfs.exe_name(c) or "?"):
            out.append({"pid": c, "cmdline": cmd[:200]})
    return out


def unregistered_children() -> list[int]:
    """Every child of this process the registry does not account for
    (:meth:`solbench.proc.registry.OwnProcesses.unregistered_children`): whatever a candidate
    left re-parented here, runtime helper or not."""
    return OWN.unregistered_children()


def kill_strays() -> list[dict[str, Any]]:
    strays = stray_children()
    for s in strays:
        if signals.send([s["pid"]], signal.SIGKILL):
            try:
                os.waitpid(s["pid"], os.WNOHANG)
            except OSError:
                pass
    return strays


class WorkerDied(Exception):
    """The worker exited (crash, os._exit, signal). ``exitcode`` as multiprocessing reports
    it (negative = signal number)."""

    def __init__(self, exitcode: int | None, during: str):
        self.exitcode = exitcode
        self.during = during
        sig = ""
        if exitcode is not None and exitcode < 0:
            try:
                sig = f" ({signal.Signals(-exitcode).name})"
            except ValueError:
                pass
        super().__init__(f"worker exited with code {exitcode}{sig} during {during}")


class WorkerTimeout(Exception):
    """The worker did not answer within the time limit (it is killed)."""

    def __init__(self, seconds: float, during: str):
        self.seconds = seconds
        self.during = during
        super().__init__(f"no answer within {seconds:.0f} s during {during}")


class ChannelTampered(ProtocolError):
    """The worker's ends of its channels to the parent are no longer the sockets the parent
    handed it (a man in the middle: the candidate dup2()ed another socket over the reply fd
    and proxies the replies). ``evidence`` is what the parent read from /proc."""

    def __init__(self, during: str, evidence: dict[str, Any]):
        self.during = during
        self.evidence = evidence
        super().__init__(f"the worker's channel to the parent was replaced during {during}: "
                         f"{evidence.get('problems')}")


#: glibc malloc of every worker (candidate's and reference's alike): no allocation is served by
#: its own mmap and freed memory is never returned to the OS, so a buffer freed after one call
#: is reused, its pages already faulted in, by the next (the steady state of PyTorch's CUDA
#: caching allocator, on the CPU). Without it a non-DPS call of 64 MiB (relu 16384x1024 f32)
#: mapped and faulted a fresh buffer on every call, 50-60 ms against 8-11 ms for the same relu
#: written into the slot (DPS) on a 2-core host, and an honest DPS relu read 5.7x against the
#: reference (docs/harness.md, "DPS and non-DPS alike"). Env names: mallopt(3).
WORKER_MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36), "MALLOC_TOP_PAD_": "0"}


#: requests that run harness code only (nothing of a candidate's or a problem's): sent before
#: the parent has imported every module it may run (harness/sandbox.py
#: ``preload_trusted_modules``), so a worker's start overlaps that import
PRELOAD_FREE_OPS = frozenset({"ping", "warm_profiler", "exit"})

#: the worker's start-up steps, in order (harness/worker.py stamps each when it ends)
START_STEPS = ("module", "imports", "sandbox", "torch", "cuda", "ready")


def start_phases(t_spawn: float, stamps: object, t_hello: float) -> dict[str, float]:
    """Seconds of a worker's start by step, from the parent's spawn (``t_spawn``) to the
    hello's arrival (``t_hello``), both CLOCK_MONOTONIC, and the worker's own ``stamps``
    (step -> CLOCK_MONOTONIC when it ended; the sandbox makes no time namespace, so both
    sides read one clock): ``module`` (interpreter start and the harness package's imports),
    ``imports`` (the worker module's), ``sandbox`` (its last steps inside the worker),
    ``torch`` (import), ``cuda`` (context), ``ready`` (the worker's own set-up: snapshot,
    guard tables), ``hello`` (the reply's way back). The stamps come before any candidate
    code exists; still, a missing step is skipped, and stamps that are not numbers in order
    within the spawn-to-hello span give an empty dict (nothing is claimed)."""
    if not isinstance(stamps, dict):
        return {}
    out: dict[str, float] = {}
    prev = t_spawn
    for step in START_STEPS:
        t = stamps.get(step)
        if t is None:
            continue
        if not isinstance(t, (int, float)) or not prev <= t <= t_hello:
            return {}
        out[step] = round(t - prev, 4)
        prev = t
    if out:
        out["hello"] = round(t_hello - prev, 4)
    return out


class WorkerHandle:
    """One worker process (a fresh ``python -m solbench.harness.worker``) inside the sandbox
    of :mod:`solbench.harness.sandbox`, connected through a private AF_UNIX socket pair (no
    path, no name: only the two ends exist) plus a SOCK_SEQPACKET pair the parent passes CPU
    buffers' memfds on (SCM_RIGHTS, :mod:`solbench.harness.shm`).

    Trust boundary: requests go parent -> worker pickled (the worker may unpickle what the
    parent sends); replies come back as length-prefixed **JSON only**, at most
    :data:`MAX_REPLY_BYTES`, read by the waiting thread without blocking past the request's
    deadline (:meth:`_read_reply`), so a stalled or garbage reply can never block or execute
    code in the parent; requests are sent non-blocking with a deadline, so a
    worker that stops reading cannot block it either. After every reply the parent checks
    from /proc that the worker still holds exactly the sockets it was handed
    (:meth:`check_channels`). Tensors are never sent back: the parent owns every
    buffer (sealed memfds on CPU, CUDA IPC on GPU). stdout/stderr of the worker are drained
    by a parent thread into a log file that keeps at most ``log_cap_bytes``.

    ``pid`` is the worker's pid as this process sees it; ``init_pid`` the sandbox's pid 1
    (bwrap's reaper, the worker's parent); ``proc`` is the launched process (bwrap, or the
    worker itself when unsandboxed); ``sandbox`` is
    ``{"mode", "uid", "namespaces", "warning", "seccomp"}`` for this worker.
    ``on_spawn(proc)`` is called with the launched process as soon as it exists, under the
    spawn lock (:class:`~solbench.harness.workers.SparePool` pauses it there);
    ``before_spawn()`` just before the fork, under the same lock (it raises to refuse one).
    ``build_out``: a host directory the worker may write (an ahead-of-time build's output,
    :mod:`solbench.harness.prebuild`); the worker finds it in ``$SOLBENCH_BUILD_OUT``.
    Not thread-safe; one request in flight at a time."""

    def __init__(self, device: str, log_cap_bytes: int = 16 << 20, start_timeout_s: float = limits.WORKER_START_S,
                 on_spawn=None, before_spawn=None, build_out: str | None = None):
        import socket
        import sys
        from multiprocessing.connection import Connection

        from . import sandbox

        if _SHUTTING_DOWN:
            raise WorkerDied(None, "start (solbench is shutting down)")
        self.device = device
        self.alive = False
        self.uid: int | None = None
        # the worker's log: a file with no name (O_TMPFILE, or unlinked at once), so nothing of
        # it is left in the host's temp folder however the worker or this process ends; read
        # by offset, kept open until the handle is closed or collected
        self._logf = tempfile.TemporaryFile(prefix="solbench-worker-", suffix=".log")
        self._log_offset = 0
        mode, warning = sandbox.resolve_mode(device)
        self.uid = sandbox.take_uid() if mode == "uid" else None
        self.sandbox = {"mode": mode, "uid": self.uid if self.uid is not None else os.geteuid(),
                        "namespaces": sandbox.namespaces(mode, device), "warning": warning,
                        "seccomp": mode != "none" and sandbox._seccomp_available()}
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._fdchan, fd_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # what the worker's ends are, recorded here, before the worker (let alone a candidate)
        # exists: after every reply the parent reads the worker's fds from /proc and compares
        # (the fd numbers survive the spawn: pass_fds keeps them)
        self.channels = {name: (sk.fileno(), f"socket:[{os.fstat(sk.fileno()).st_ino}]")
                         for name, sk in (("reply", theirs), ("buffers", fd_theirs))}
        self.tampered: dict[str, Any] | None = None
        self._tamper_reported = False
        self._unverifiable_reported = False
        self.contradictions: list[dict[str, str]] = []
        self.channel_unverifiable: str | None = None
        self.tids_hello: set[int] = set()
        self.harness_op_cap_s: float | None = None
        self._sent_fds: set[str] = set()
        # an allow-list of the harness's variables (a token the user exported never reaches
        # the candidate, whose output goes to the trace's log: sandbox.worker_env)
        env = sandbox.worker_env(os.environ)
        # the worker imports the same solbench as this process (an installed copy elsewhere
        # must never stand in for it), then the installed distributions this process imports
        # from outside the interpreter's own paths (its dependencies, e.g. wheels installed with
        # --target and put on PYTHONPATH), and nothing else
        import solbench

        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(solbench.__file__)))]
            + sandbox.installed_import_paths())
        env["PYTHONUNBUFFERED"] = "1"
        env["SOLBENCH_SANDBOX_MODE"] = mode
        # the memory bound (harness/memcap.py): a cgroup the launcher joins, else the worker's
        # own RLIMIT_DATA; the worker is told the parent's cap (its own default would differ)
        self.memcap = MemCap()
        env["SOLBENCH_SANDBOX_MEM"] = str(self.memcap.cap)
        env["SOLBENCH_SANDBOX_MEM_RLIMIT"] = "1" if self.memcap.mechanism == "rlimit" else "0"
        self.sandbox["memory"] = {"cap_bytes": self.memcap.cap, "mechanism": self.memcap.mechanism,
                                  "cgroup": self.memcap.path}
        self._memcap_reported = False
        self._scratch: str | None = None
        if mode != "none":
            env = sandbox.sandbox_env(env, mode, self.uid)
        else:  # no private tmpfs: a temp folder of its own, removed when it is killed
            self._scratch = tempfile.mkdtemp(prefix="solbench-worker-")
            env.update(TMPDIR=self._scratch, TMP=self._scratch, TEMP=self._scratch)
        env.update(WORKER_MALLOC_ENV)
        if build_out is not None:
            # an ahead-of-time build (harness/prebuild.py): the one host directory this worker
            # may write, its build output; in ``uid`` mode owned by the worker's uid
            env["SOLBENCH_BUILD_OUT"] = sandbox.BUILD_OUT_MOUNT if mode != "none" else build_out
            if self.uid is not None:
                os.chown(build_out, self.uid, self.uid)
        info_r, info_w = os.pipe() if mode != "none" else (None, None)
        argv = [sys.executable, "-m", "solbench.harness.worker", f"fd:{theirs.fileno()}", device,
                f"--fd-channel={fd_theirs.fileno()}"]
        cmd = sandbox.wrap(argv, device, mode, info_w, build_out)
        # the bound on the sandbox's tasks, in every mode (RLIMIT_NPROC does not bind for a
        # root-uid worker: userns mode on a root harness): the launcher joins its cgroup
        # before it execs bwrap, so no task of the sandbox is ever outside it
        self.taskcap = TaskCap()
        cmd = self.memcap.wrap(self.taskcap.wrap(cmd))
        self.sandbox["tasks"] = {"limit": self.taskcap.limit, "mechanism": self.taskcap.mechanism,
                                 "cgroup": self.taskcap.path}
        self._taskcap_reported = False
        passed = [theirs.fileno(), fd_theirs.fileno()] + ([info_w] if info_w is not None else [])

        become_subreaper()
        self.log_dropped = 0
        try:
            with _SPAWN_LOCK:
                # again here, not only on entry: a start begun on another thread before
                # shutdown_all (an early worker resolving its sandbox while a Ctrl-C
                # arrives) must not fork after it
                if _SHUTTING_DOWN:
                    raise WorkerDied(None, "start (solbench is shutting down)")
                if before_spawn is not None:  # may raise: no fork of this process now
                    before_spawn()
                t_spawn = time.monotonic()
                self.proc = _spawn(cmd, env=env, pass_fds=passed)
                LIVE_WORKERS.add(self.proc.pid)
                if on_spawn is not None:  # under the lock: a worker started ahead is paused
                    on_spawn(self.proc)   # from its first instant if a timed window is open
        except BaseException:
            sandbox.release_uid(self.uid)
            self.taskcap.release()
            self.memcap.release()
            for f in (info_r, info_w):
                if f is not None:
                    os.close(f)
            self._logf.close()
            raise
        finally:
            theirs.close()
            fd_theirs.close()
        self.pid = self.pgid = self.proc.pid
        _HANDLES.add(self)
        self.taskcap.watch(self.proc.pid)  # the launcher: bwrap's init and the worker descend from it
        self.memcap.watch(self.proc.pid)  # where the cap is a per-process rlimit: the parent sums the tree
        self._drain = threading.Thread(target=self._drain_logs, args=(log_cap_bytes,), daemon=True)
        self._drain.start()
        if info_w is not None:
            os.close(info_w)
            pid = _read_child_pid(info_r, start_timeout_s, self.proc)
            os.close(info_r)
            if pid is None:
                self.kill()
                raise WorkerDied(self._exitcode(), "start (the sandbox did not start: see the log)")
            self.init_pid = pid  # the sandbox's pid 1 (bwrap's reaper): the worker is its child
            LIVE_WORKERS.add(pid)
        # a duplicate for the parent's own sends (MSG_DONTWAIT + a deadline: a worker that
        # stops reading can never block the parent); the Connection reads replies
        self._sock = socket.socket(fileno=os.dup(mine.fileno()))
        self.conn = Connection(mine.detach())
        self.seq = 0
        self.alive = True
        status, hello = self._wait(0, start_timeout_s, "start")
        if info_w is not None and status == "ok":
            kids = sorted(procfs.child_pids(self.init_pid))  # the worker, which has said hello
            if len(kids) != 1:
                self.kill()
                raise WorkerDied(self._exitcode(), f"start: sandbox init has children {kids}")
            self.pid = kids[0]
            LIVE_WORKERS.add(self.pid)
        if status == "ok":
            # the worker's threads before any candidate code was imported (evidence for a
            # tampering finding: a proxy thread started at import is among the later ones)
            self.tids_hello = procfs.thread_ids(self.pid)
        try:  # bwrap --new-session: the worker is in its init's session and process group
            self.pgid = os.getpgid(self.pid)
        except OSError:
            self.pgid = self.pid
        #: replies are read by the thread that waits for them (:meth:`_read_reply`): there is
        #: no reader thread whose run-queue wait would add to a call's round trip
        self.reader_tid: int | None = None
        if status != "ok":
            self.kill()
            raise WorkerDied(self._exitcode(), f"start: {hello.get('message')}")
        self.flush_default = hello.get("flush_default", 0)
        self.start_phases = start_phases(t_spawn, hello.get("start_stamps"), time.monotonic())
        sc = hello.get("seccomp")
        if isinstance(sc, dict) and self.sandbox.get("seccomp"):
            # the worker's own word, sent before any candidate code existed: the parent could
            # only tell that pyseccomp imports here
            if sc.get("ok") is not True:
                self.sandbox["seccomp"] = False
                self.sandbox["seccomp_failure"] = str(sc.get("why") or "not loaded")[:400]

    def outside_worker_tree(self) -> list[int]:
        """Processes in this worker's sandbox that are not the worker or its descendants: the
        sandbox's init has exactly one child, the worker (checked at start), so anything else
        there was made by the candidate to leave the worker's tree (``clone(CLONE_PARENT)``
        makes the new process a child of init, ``setsid`` takes it out of the process group)
        and is seen by no walk from the worker. Empty when unsandboxed."""
        init = getattr(self, "init_pid", None)
        if not init or not self.alive:
            return []
        # every process below init is below exactly one of its children, so the sandbox less
        # the worker's tree is the other children's trees: the worker's own (dozens of
        # threads, a children file each) is not walked again
        out: set[int] = set()
        for c in procfs.child_pids(init) - {self.pid}:
            out |= {c} | procfs.descendants(c)
        return sorted(out)

    def _exitcode(self) -> int | None:
        """The worker's exit status as multiprocessing reports it (negative = signal); bwrap
        passes a signal death on as 128 + signal number."""
        rc = self.proc.poll()
        if rc is not None and rc > 128 and self.sandbox["mode"] != "none":
            return -(rc - 128)
        return rc

    def _drain_logs(self, cap: int) -> None:
        """Copy the worker's output to the log file until ``cap`` bytes, then count the rest."""
        written = 0
        out = self.proc.stdout
        while True:
            try:
                chunk = out.read1(65536) if hasattr(out, "read1") else out.read(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            if written < cap:
                part = chunk[: cap - written]
                try:
                    self._logf.write(part)
                    self._logf.flush()
                except (OSError, ValueError):
                    return
                written += len(part)
                self.log_dropped += len(chunk) - len(part)
            else:
                self.log_dropped += len(chunk)

    def _read_reply(self, deadline: float, during: str) -> tuple[str, Any]:
        """One reply, read by the calling thread from the worker's socket: ``("msg", [seq,
        status, payload])``, ``("eof", why)`` (the worker closed its end), ``("garbage", why)``
        (not a frame of at most :data:`MAX_REPLY_BYTES` of JSON ``[seq, status, payload]``) or
        ``("timeout", None)`` once ``deadline`` (``time.monotonic``) passes with the reply
        incomplete. The framing is multiprocessing.Connection's (what the worker's
        ``send_bytes`` writes): a signed 4-byte big-endian length, or -1 and an unsigned 8-byte
        one. Every read is non-blocking behind a ``select`` bounded by the deadline, so a
        worker that sends part of a frame and stops cannot hold the parent; between two
        slices of at most 0.25 s a worker that exited is :meth:`_dead` (its socket may stay
        open in a child that inherited it)."""
        import select
        import struct

        sock = self._sock
        buf = bytearray()
        need, body_len = 4, None
        while len(buf) < need:
            try:
                chunk = sock.recv(min(need - len(buf), 1 << 20), socket.MSG_DONTWAIT)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout", None
                r, _, _ = select.select([sock], [], [], min(left, 0.25))
                if not r and self.proc.poll() is not None:
                    self._dead(during)
                continue
            except OSError as e:
                return "eof", str(e)
            if not chunk:
                return "eof", "the worker closed its end of the channel"
            buf += chunk
            if body_len is None and len(buf) == need:
                if need == 4:
                    (n,) = struct.unpack("!i", bytes(buf))
                    if n == -1:
                        need = 12
                        continue
                    if n < 0:
                        return "garbage", f"a frame length of {n}"
                else:
                    (n,) = struct.unpack("!Q", bytes(buf[4:12]))
                if n > MAX_REPLY_BYTES:
                    return "garbage", f"a reply of {n:,} bytes (at most {MAX_REPLY_BYTES:,})"
                body_len, need = n, need + n
        try:
            msg = json.loads(bytes(buf[need - body_len:]).decode("utf-8"))
            if not (isinstance(msg, list) and len(msg) == 3 and isinstance(msg[0], int)
                    and isinstance(msg[1], str) and isinstance(msg[2], dict)):
                raise ValueError("not a [seq, status, payload] reply")
        except Exception as e:  # noqa: BLE001 - ValueError, UnicodeDecodeError, RecursionError (deep nesting)
            return "garbage", f"{type(e).__name__}: {str(e)[:200]}"
        return "msg", msg

    def _wait(self, seq: int, timeout_s: float, during: str, started: float | None = None):
        deadline = (started if started is not None else time.monotonic()) + timeout_s
        kind, item = self._read_reply(deadline, during)
        if kind == "timeout":
            self.kill()
            raise WorkerTimeout(timeout_s, during)
        if seq == 0 and kind != "msg":
            # no hello: a worker that died before it says why only in its log: keep the tail
            self.kill()
            tail = " | ".join(self.log_since_last(1200).strip().splitlines()[-6:])
            raise ProtocolError(f"no hello from the worker (exit {self._exitcode()}): "
                                f"{kind}: {item}" + (f"; log: {tail}" if tail else ""))
        if kind == "eof":
            self._dead(during)
        if kind == "garbage":
            self.kill()
            raise ProtocolError(f"unreadable reply during {during}: {item}")
        rseq, status, payload = item
        if seq == 0:  # the hello: before any channel check is set up
            return status, payload
        if rseq != seq:
            self.kill()
            raise ProtocolError(f"reply #{rseq} to request #{seq} during {during}")
        # the reply's content is data; where it came from is checked by the parent itself
        self.check_channels(during, full=during in FULL_CHANNEL_CHECK_OPS)
        if self.tampered is not None and during != "build":
            # nothing from this worker is read any more (the build reply only names the
            # entry's kind: the evaluation's first request then ends the workload, where
            # the finding is recorded)
            self.kill()
            raise ChannelTampered(during, self.tampered)
        return status, payload

    def cap_harness_ops(self, call_timeout_s: float | None) -> None:
        """With a call limit set (``--timeout``), no harness op of :data:`CAPPED_OPS` waits
        longer than ``max(call_timeout_s, HARNESS_OP_FLOOR_S)`` (their own limits, 60-120 s,
        otherwise): a worker stalled in an integrity check ends within the user's limit's
        order, not a minute later. None: the ops' own limits."""
        self.harness_op_cap_s = None if call_timeout_s is None else max(float(call_timeout_s), HARNESS_OP_FLOOR_S)

    def check_channels(self, during: str, full: bool = False) -> dict[str, Any] | None:
        """Compare the worker's channel fds with the sockets the parent handed it (read from
        /proc/<worker>/fd by the parent; the candidate can rewrite what the worker says, not
        what the kernel says the worker holds). ``full``: also every other fd of the worker,
        since no honest worker holds a second reference to either socket (a proxy that swaps
        the fd back while it forwards must keep one somewhere). The first tampering seen is
        kept in :attr:`tampered` (and returned); later calls return it again. When /proc of
        the worker cannot be read the check says so once (:attr:`channel_unverifiable`)."""
        if self.tampered is not None or not self.alive:
            return self.tampered
        problems: list[str] = []
        try:
            for name, (fd, want) in self.channels.items():
                got = procfs.fd_target(self.pid, fd)
                if got != want:
                    problems.append(f"{name} fd {fd} is {got or 'closed'}, the parent's socket is {want}")
            if full:
                wanted = {want: fd for fd, want in self.channels.values()}
                for entry in os.listdir(f"/proc/{self.pid}/fd"):
                    try:
                        n = int(entry)
                        target = procfs.fd_target(self.pid, n)
                    except (ValueError, ProcessLookupError):
                        continue
                    if target in wanted and wanted[target] != n:
                        problems.append(f"fd {n} is a second reference to {target} (fd {wanted[target]})")
        except ProcessLookupError:
            return None  # gone: the caller sees it die
        except OSError as e:  # PermissionError (no ptrace-read access), or anything else odd
            if self.channel_unverifiable is None:
                self.channel_unverifiable = f"/proc/{self.pid}/fd unreadable: {type(e).__name__}: {e}"
            return None
        if problems:
            now = procfs.thread_ids(self.pid)
            self.tampered = {"problems": problems, "during": during,
                             "threads_at_hello": len(self.tids_hello),
                             "threads_since_hello": sorted(now - self.tids_hello)[:20]}
        return self.tampered

    def tamper_findings(self) -> list:
        """Findings of what the parent saw at this worker's boundary: ``reply_channel_tampered``
        when :meth:`check_channels` saw tampering, ``reply_contradiction`` for each reply that
        was well-formed but impossible for this worker (recorded in :attr:`contradictions` by
        :func:`solbench.harness.protocol.request`). Each is returned once."""
        from .checks import finding

        out = []
        if self.tampered is not None and not self._tamper_reported:
            self._tamper_reported = True
            out.append(finding("reply_channel_tampered",
                               f"the worker's channel to the parent was replaced (seen during "
                               f"{self.tampered['during']}): {'; '.join(self.tampered['problems'][:3])}",
                               dict(self.tampered)))
        if self.channel_unverifiable is not None and not self._unverifiable_reported:
            self._unverifiable_reported = True  # said once per worker, never silently
            out.append(finding("reply_channel_unverified",
                               f"the parent could not check the worker's channel: {self.channel_unverifiable}",
                               {"reason": self.channel_unverifiable}))
        if self.taskcap.hit is not None and not self._taskcap_reported:
            self._taskcap_reported = True
            out.append(finding("task_limit", self.taskcap.describe(), dict(self.taskcap.hit)))
        mem_hit = self.memcap.hit() if not self._memcap_reported else None
        if mem_hit is not None:
            self._memcap_reported = True
            out.append(finding("memory_limit", self.memcap.describe(), mem_hit))
        if self.contradictions:
            c = self.contradictions[0]
            out.append(finding("reply_contradiction", f"{c['op']} reply: {c['reason']}",
                               {"op": c["op"], "reason": c["reason"], "count": len(self.contradictions)}))
            self.contradictions = []
        return out

    def _send_all(self, data: bytes, deadline: float, limit: float, during: str) -> None:
        """Write ``data`` to the worker's socket without ever blocking past ``deadline``: a
        worker (or a proxy of the candidate's) that stops reading fills the socket buffer,
        and a blocking send would hold the parent for ever."""
        import select

        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(limit, f"{during} (the worker stopped reading requests)")
            _, w, _ = select.select([], [self._sock], [], min(left, 0.25))
            if not w:
                if self.proc.poll() is not None:
                    self._dead(during)
                continue
            try:
                n = self._sock.send(view, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            view = view[n:]

    def _send_fds_bounded(self, ids: list[str], deadline: float, limit: float, during: str) -> None:
        """The buffers' memfds (:func:`shm.memfd_batches`) with the same deadline as
        :meth:`_send_all`."""
        import select

        from .shm import memfd_batches

        for tag, fds in memfd_batches(ids):
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise WorkerTimeout(limit, f"{during} (the worker stopped reading its buffers)")
                _, w, _ = select.select([], [self._fdchan], [], min(left, 0.25))
                if not w:
                    if self.proc.poll() is not None:
                        self._dead(during)
                    continue
                try:
                    socket.send_fds(self._fdchan, [tag], fds, socket.MSG_DONTWAIT)
                    break
                except BlockingIOError:
                    continue

    def _dead(self, during: str):
        try:
            self.proc.wait(timeout=limits.DEAD_REAP_S)
        except Exception:  # noqa: BLE001
            pass
        self.alive = False
        if self.taskcap.hit is not None:  # killed at its task limit: the reason says so
            during = f"{during} ({self.taskcap.describe()})"
        if self.memcap.hit() is not None:  # killed at its memory cap: the reason says so
            during = f"{during} ({self.memcap.describe()})"
        raise WorkerDied(self._exitcode(), during)

    def request(self, op: str, payload: dict | None = None, timeout_s: float = limits.REQUEST_S) -> tuple[str, dict]:
        """Send one request and wait for its reply. Raises WorkerDied / WorkerTimeout /
        ProtocolError; the worker is unusable after any of them."""
        if not self.alive:
            raise WorkerDied(self._exitcode(), op)
        if self.tampered is not None:
            self.kill()
            raise ChannelTampered(op, self.tampered)
        import struct
        from multiprocessing.reduction import ForkingPickler

        if op not in PRELOAD_FREE_OPS and not _sandbox.preloaded():
            # before the first request that may run code other than the harness's: every
            # module the parent may run is imported (sandbox.preload_trusted_modules)
            _sandbox.preload_trusted_modules()
        if op in CAPPED_OPS and self.harness_op_cap_s is not None:
            timeout_s = min(timeout_s, self.harness_op_cap_s)
        self.seq += 1
        # the whole request, sends included, within its limit (sends get at most
        # SEND_TIMEOUT_S of it: an honest worker reads a request at once)
        t0 = time.monotonic()
        send_limit = min(timeout_s, SEND_TIMEOUT_S)
        send_deadline = t0 + send_limit
        try:
            from .shm import memfd_ids

            new = [i for i in memfd_ids(payload) if i not in self._sent_fds]
            if new:  # before the request: the worker maps them while it handles it
                self._send_fds_bounded(new, send_deadline, send_limit, op)
                self._sent_fds.update(new)
            # multiprocessing.Connection's framing (what the worker's conn.recv() reads)
            # (ForkingPickler: torch's reductions turn CUDA tensors into IPC handles)
            body = bytes(ForkingPickler.dumps((self.seq, op, payload or {})))
            head = struct.pack("!i", len(body)) if len(body) <= 0x7FFFFFFF else struct.pack("!iQ", -1, len(body))
            self._send_all(head + body, send_deadline, send_limit, op)
        except (BrokenPipeError, ConnectionError, OSError):
            self._dead(op)
        return self._wait(self.seq, timeout_s, op, started=t0)

    def log_since_last(self, cap: int = 8192) -> str:
        """New log text since the previous call, keeping the last ``cap`` characters."""
        if self.proc.poll() is not None:  # exited: let the drain thread copy its last output
            self._drain.join(timeout=limits.LOG_DRAIN_S)
        try:
            fd = self._logf.fileno()
            size = os.fstat(fd).st_size
            start = max(self._log_offset, size - cap)
            data = os.pread(fd, size - start, start)
            skipped = start - self._log_offset
            self._log_offset = size
        except (OSError, ValueError):  # ValueError: the handle was closed
            return ""
        text = data.decode(errors="replace")
        if self.log_dropped:
            text += f"\n[... {self.log_dropped} more bytes of output dropped (log cap) ...]"
            self.log_dropped = 0
        if skipped > 0:
            text = f"[... {skipped} bytes of log cut ...]\n" + text
        return text

    def kill(self) -> None:
        """SIGKILL the worker, its process group and every descendant (the candidate's forks
        included), then the launcher; reap it. In a sandbox the worker is its pid namespace's
        init, so its death also takes every process left in the namespace."""
        from . import sandbox

        self.alive = False
        pid = getattr(self, "pid", None)
        if pid:  # its descendants are listed before any is killed (they re-parent away)
            signals.kill_tree(pid, groups=[getattr(self, "pgid", None) or 0])
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=limits.KILLED_REAP_S)
        except Exception:  # noqa: BLE001
            pass
        init = getattr(self, "init_pid", None)
        if init:  # takes every process left in the pid namespace
            signals.send([init], signal.SIGKILL)
        cap = getattr(self, "taskcap", None)
        if cap is not None:  # whatever is left in its cgroup, then the cgroup itself
            cap.release()
        LIVE_WORKERS.discard(self.proc.pid)
        LIVE_WORKERS.discard(pid)
        LIVE_WORKERS.discard(init)
        _HANDLES.discard(self)
        sandbox.release_uid(self.uid)
        self.uid = None
        if not _SHUTTING_DOWN:
            kill_strays()
        mem = getattr(self, "memcap", None)
        if mem is not None:  # its OOM count is kept (MemCap.hit) for the trace made after
            mem.release()
        if getattr(self, "_scratch", None):
            import shutil

            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        # the log stays open (nameless) until close(): the trace's log is read after a kill
        for f in (getattr(self, "_fdchan", None), getattr(self, "_sock", None)):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass

    def pause(self) -> None:
        """SIGSTOP the worker's process group and the worker itself by pid (no thread of it
        runs until :meth:`resume`): a candidate can take the worker out of the group it
        started in (``setpgid(0, 0)``), and a stop of the group alone would then miss it."""
        signals.send_group(self.pgid, signal.SIGSTOP)
        signals.send([self.pid], signal.SIGSTOP)

    def resume(self) -> None:
        signals.send_group(self.pgid, signal.SIGCONT)
        signals.send([self.pid], signal.SIGCONT)

    def close(self) -> None:
        if self.alive:
            try:
                self.request("exit", timeout_s=limits.WORKER_EXIT_S)
            except Exception:  # noqa: BLE001
                pass
        self.kill()
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            self._logf.close()
        except Exception:  # noqa: BLE001
            pass
