"""solbench's own bytecode cache, for a host whose torch was installed without bytecode.

Python runs a module from its compiled bytecode when a valid ``.pyc`` exists (beside the source
in ``__pycache__``, or under ``sys.pycache_prefix``) and otherwise compiles the source again at
every import. pip writes the ``.pyc`` files at install time unless told not to, so on most
machines nothing is compiled. An install without them in a folder the process cannot write (a
container image built with ``pip install --no-compile`` or ``PYTHONDONTWRITEBYTECODE=1``, a
system environment owned by another user) compiles torch's ~1,000 imported modules in every
process: measured with py-spy on the H100 host of the device tool, 3 s of the parent's
``import torch`` and about 2 s of each worker's start (``SourceLoader.source_to_code``;
bench/results/device_s25_h100/README.md). A cold ``solbench eval`` starts three such
processes.

What :func:`enable` does, only when torch has no bytecode beside its source and the user set no
prefix of their own: the parent (trusted code, before any candidate exists) reads and writes
bytecode under ``$SOLBENCH_CACHE/pyc`` (Python's own prefix mechanism,
``sys.pycache_prefix``: the tree mirrors the sources' absolute paths, and each file is
validated against its source's modification time and size as usual, so an upgraded package is
recompiled, never run stale). Its children inherit it through ``PYTHONPYCACHEPREFIX``.
A sandboxed worker sees it read-only at :data:`MOUNT` (harness/sandbox.py binds it there) and
writes no bytecode at all (``PYTHONDONTWRITEBYTECODE``): no candidate can plant a ``.pyc`` that
a later process would run. An unsandboxed worker (``SOLBENCH_SANDBOX=off``) has the user's
own file access anyway, this folder included. Off with ``SOLBENCH_BYTECODE_CACHE=0``.

Python creates the cache's folders and files under the process's umask: with one that denies
others read access (077), a worker of another uid (the sandbox's ``uid`` mode, used for CPU
workers when the harness runs as root) cannot read them and compiles as before: slower, never
unsafe. CUDA workers run in ``userns`` mode under the harness's own uid and read them.

A worker also imports packages the parent never does, after the candidate's build: torch.compile's
(``torch._dynamo``, ``torch._inductor``, and ``sympy`` / ``mpmath`` under them) and Triton's
(:data:`WORKER_ONLY`). A worker cannot write the cache, so without more it compiled them in every
process; :func:`fill`, run by the CLI as a command ends, compiles the missing or stale files of
those the command's candidates will import (:func:`want`, from their languages and sources)
into the cache (the standard library's compileall in a child process group, at most
:data:`FILL_BUDGET_S` a process, the rest next time), and the worker's build keeps reading the
cache for what it imports after the candidate's code (harness/build.py).

The folder is never pruned (about 33 MB after one evaluation on torch 2.13: 1,390 files, one
set per installed version of each module); deleting it is always safe.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from . import paths

#: where a sandboxed worker sees the bytecode cache (read-only), outside its writable scratch
MOUNT = "/solbench-pyc"

_active: str | None = None

#: packages a worker may import that the parent never imports: after a candidate's build,
#: torch.compile's (sympy and mpmath under it) and Triton's; at its start on CUDA, cupti-python's
#: (harness/cupti_activity.py). Compiled by :func:`fill`
WORKER_ONLY = ("torch._dynamo", "torch._inductor", "sympy", "mpmath", "triton", "cupti")
#: most seconds :func:`fill` spends in one process (the files left are compiled next time)
FILL_BUDGET_S = 2.0
#: the packages of :data:`WORKER_ONLY` this process's workers will import (:func:`want`)
_wanted: set[str] = set()
#: what in a candidate's sources says its worker imports torch.compile's packages (and, on
#: CUDA, Triton's through inductor's kernels)
_COMPILE_MARKS = ("torch.compile", "torch._dynamo", "torch._inductor", "torch.export", "@compile")


def has_bytecode(module: str = "torch") -> bool | None:
    """Whether top-level ``module``'s ``__init__`` has a ``.pyc`` beside its source (in its
    ``__pycache__``, for this interpreter's cache tag), found without importing it. None when
    the module is not installed or is not a Python source file (a namespace package, an
    extension module), so there is nothing to decide."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or not origin.endswith(".py"):
        return None
    prefix = sys.pycache_prefix
    try:  # beside the source: what pip's install-time compilation writes
        sys.pycache_prefix = None
        pyc = importlib.util.cache_from_source(origin)
    except NotImplementedError:  # no cache tag (sys.implementation.cache_tag is None)
        return None
    finally:
        sys.pycache_prefix = prefix
    return os.path.exists(pyc)


def enable(module: str = "torch") -> str | None:
    """Use solbench's bytecode cache in this process and its children when ``module`` (torch)
    has no bytecode beside its source (module doc). Call it before the heavy imports; once is
    enough (later calls return the first answer). Returns the cache folder in use, or None
    when it is not used: turned off (``SOLBENCH_BYTECODE_CACHE=0``), a prefix already set
    (the user's ``PYTHONPYCACHEPREFIX``), the module has bytecode or is not installed, or the
    folder cannot be created. Never raises."""
    global _active
    if _active is not None:
        return _active
    if not paths.bytecode_cache_on() or sys.pycache_prefix is not None:
        return None
    if has_bytecode(module) is not False:
        return None
    try:
        d = paths.cache_dir() / "pyc"
        # readable by a worker of another uid (the sandbox's ``uid`` mode), which binds this
        # folder itself: the folders above it (a private home) need not be traversable
        d.mkdir(mode=0o755, exist_ok=True)
    except OSError:
        return None
    if not os.access(d, os.W_OK | os.X_OK):
        return None
    _active = str(d)
    sys.pycache_prefix = _active
    # PYTHONDONTWRITEBYTECODE asks that nothing be written beside the sources; this folder is
    # solbench's own cache, and the parent is the only writer the workers trust
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = _active
    return _active


def active() -> str | None:
    """The bytecode cache folder :func:`enable` put in use in this process, else None."""
    return _active


def want(texts: list[str], languages: list[str], device: str) -> None:
    """Note which of :data:`WORKER_ONLY` the worker of a candidate will import, from what the
    parent knows before it runs (its languages, its sources as text, the device): Triton for a
    Triton candidate or sources naming it, torch.compile's packages (and Triton) for sources
    that compile, cupti-python for any CUDA worker. Only a guess of what is worth compiling
    for the next runs (:func:`fill`): a miss costs that worker a compile, as before. Nothing
    is noted when no cache is active."""
    if _active is None:
        return
    if any("triton" in str(x).lower() for x in languages) or any("triton" in t for t in texts):
        _wanted.add("triton")
    if any(m in t for t in texts for m in _COMPILE_MARKS):
        _wanted.update(("torch._dynamo", "torch._inductor", "sympy", "mpmath", "triton"))
    if str(device).startswith("cuda"):
        _wanted.add("cupti")


def wanted() -> tuple[str, ...]:
    """The packages :func:`want` noted in this process, in :data:`WORKER_ONLY`'s order."""
    return tuple(n for n in WORKER_ONLY if n in _wanted)


def package_dir(name: str) -> str | None:
    """The source folder of package ``name`` (``torch._inductor``: torch's folder + ``_inductor``),
    found without importing it (only the top-level package is looked up); None when it is not
    installed or is not a folder of Python sources."""
    top, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    locs = list(getattr(spec, "submodule_search_locations", None) or []) if spec is not None else []
    if not locs:
        return None
    d = os.path.join(locs[0], *rest.split(".")) if rest else locs[0]
    return d if os.path.isdir(d) else None


def stale_sources(dirs: list[str]) -> list[str]:
    """The ``.py`` files under ``dirs`` whose bytecode under the active cache is missing or
    not valid for the source (:func:`_fresh`: what an import would compile), sorted; [] when no
    cache is active."""
    if _active is None:
        return []
    out = []
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs[:] = sorted(x for x in subdirs if x != "__pycache__")
            for f in files:
                if not f.endswith(".py"):
                    continue
                src = os.path.join(root, f)
                if not _fresh(src):
                    out.append(src)
    return sorted(out)


def _fresh(src: str) -> bool:
    """Whether the cache holds bytecode an import of ``src`` would use: this interpreter's
    magic number and, for a timestamp ``.pyc``, the source's modification time and size as
    its header records them (the checks of importlib's SourceLoader)."""
    try:
        with open(importlib.util.cache_from_source(src), "rb") as fh:
            head = fh.read(16)
        st = os.stat(src)
    except (OSError, NotImplementedError, ValueError):
        return False
    if len(head) < 16 or head[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(head[4:8], "little") != 0:  # a hash-based .pyc: checked by its own rule
        return True
    return (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)


def fill(names: tuple[str, ...] | None = None, budget_s: float = FILL_BUDGET_S,
         jobs: int | None = None) -> dict | None:
    """Compile into the active cache the stale sources (:func:`stale_sources`) of packages
    ``names`` (installed ones only; default: those :func:`want` noted in this process), for
    the workers, which import them and cannot write the cache. Runs the standard library's
    compileall (``python -I``; ``jobs`` processes: default all CPUs but one, at most 8) in its
    own process group, killed after ``budget_s`` seconds; every file it finished is kept (each
    ``.pyc`` is written whole, then renamed), the others are compiled by a later call. Once a
    fill leaves nothing stale, or nothing it can do (compileall went through the whole list,
    or made no progress in a cache that takes no file: files it cannot compile, a full disk),
    a mark in the cache (the folders' inodes and modification times, :func:`_stamps`) lets
    later calls skip the walk until a folder changes. Returns ``{"files": stale before, "left": stale
    after, "seconds", "given_up": files left and not retried}``, or None when no cache is
    active or nothing is stale. Never raises."""
    if _active is None:
        return None
    if names is None:
        names = wanted()
    t0 = time.perf_counter()
    dirs = [d for d in (package_dir(n) for n in names) if d]
    if not dirs:
        return None
    mark = os.path.join(_active, f".filled-{sys.implementation.cache_tag}.json")
    stamp = json.dumps(_stamps(dirs), sort_keys=True)
    try:  # the same folders as at the last complete fill: no walk (about 0.1 s of stats)
        with open(mark) as fh:
            if fh.read() == stamp:
                return None
    except OSError:
        pass
    todo = stale_sources(dirs)
    if not todo:
        _write_mark(mark, stamp)
        return None
    jobs = jobs or max(1, min(8, (os.cpu_count() or 2) - 1))
    finished = False
    try:
        # -I: the standard library's compileall and nothing else: ``-m`` would put the current
        # directory first on sys.path, and a ``compileall.py`` there (a candidate's folder the
        # user runs solbench from) would run here, trusted; no PYTHON* variable either, so the
        # prefix is given with -X. -X utf8: compileall reads its list from stdin, which under
        # a UTF-8 locale (en_US.UTF-8) decodes strictly, so one file name that is not UTF-8
        # ended it before its first file; UTF-8 mode reads stdin with surrogateescape, the
        # inverse of the os.fsencode below
        p = subprocess.Popen([sys.executable, "-I", "-X", "utf8", "-X", f"pycache_prefix={_active}",
                              "-m", "compileall", "-q", "-j", str(jobs), "-i", "-"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    except OSError:
        return None
    try:
        p.communicate(b"\n".join(map(os.fsencode, todo)),  # a name that is not UTF-8 too
                      timeout=max(budget_s - (time.perf_counter() - t0), 0.05))
        finished = True
    except subprocess.TimeoutExpired:
        try:  # the whole group: compileall's pool workers too
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
    except OSError:
        p.kill()
        p.wait()
    left = stale_sources(dirs)
    # also marked when compileall went through the whole list (what is left, it cannot compile
    # or write: a Python 2 file, a full disk) or made no progress in its budget in a cache that
    # takes no file (a slow start on a loaded host is retried): retried when a package folder
    # changes, not at every command
    stuck = finished or (len(left) == len(todo) and not _takes_files(_active))
    if not left or stuck:
        _write_mark(mark, stamp)
    return {"files": len(todo), "left": len(left), "seconds": round(time.perf_counter() - t0, 3),
            "given_up": bool(left) and stuck}


def _takes_files(d: str) -> bool:
    """Whether a file can be created (and is removed again) in folder ``d``."""
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".probe-")
        os.close(fd)
        os.unlink(tmp)
        return True
    except OSError:
        return False


def _stamps(dirs: list[str]) -> dict[str, list[int]]:
    """Each package folder's inode and modification time (ns): a reinstall or upgrade makes a
    new folder, or changes it; a source edited in place is not seen (its worker then compiles
    it: slower, never stale, as importlib checks each .pyc against its source)."""
    out = {}
    for d in dirs:
        try:
            st = os.stat(d)
            out[d] = [st.st_ino, st.st_mtime_ns]
        except OSError:
            out[d] = []
    return out


def _write_mark(path: str, stamp: str) -> None:
    try:
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as fh:
            fh.write(stamp)
        os.replace(tmp, path)
    except OSError:
        pass
