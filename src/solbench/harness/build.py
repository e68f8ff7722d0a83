"""Build step per language, run inside the worker (candidate side); C++ compiles run in their
own subprocess through :func:`run_build`, with a timeout.

Which language builds a solution, what it needs and how it is compiled is declared by its
plug-in (:mod:`solbench.languages`); this module only carries the mechanics:

- Every build first checks the plug-in's GPU and toolchain requirements. An unmet one is a
  :class:`BuildError` whose message is one line naming what to install
  (``cutlass: CUTLASS C++ headers (cutlass/cutlass.h) not found: pip install
  'solbench[cutlass]'``) or why the language cannot run here (``cutile: unsupported on this
  GPU (NVIDIA H200, sm_90; needs sm_100+)``), never a traceback.
- Python family (pytorch, triton, cute_dsl, cutile, cudnn_frontend, tvm_ffi, tlx): sources are
  written to ``<cache>/solutions/<hash>/`` and the entry file is imported from there (each
  DSL's own JIT cache applies to its kernels).
- C++ family (cuda_cpp, cutlass, cudnn, cublas): compiled with
  ``torch.utils.cpp_extension.load`` in a separate ``python -m solbench.harness.build_cpp``
  process (a hanging nvcc or a crashing compiler cannot take the worker down; on timeout the
  whole build process group is killed), with the plug-ins' include directories and link
  flags, and a build cache keyed by the sha256 of sources, options, languages, the toolchain
  versions (torch, CUDA, nvcc, host compiler, the plug-ins' packages) and the device's compute
  capability. The module binds the entry symbol itself (pybind11).
- KernelBench candidates that call ``load_inline`` compile at import time, inside the worker.

The first line of a failed C++ build's message is the first meaningful compiler line
(``kernel.cu(12): error: expected a ";"``): the result table shows that line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import languages as _languages
from .. import paths
from ..languages.base import CPP_COMPILED_SUFFIXES, ToolchainMissing, cuda_home, gpu_identity, tool_version
from ..spec.reference import cache_dir
from ..spec.solution import Solution


class BuildError(Exception):
    """The candidate failed to build or import (recorded as COMPILE_ERROR). The first line of
    the message is the reason shown in result tables; the rest is the log."""


class BuildTimeout(BuildError):
    """A build subprocess ran past its timeout (its process group was killed)."""


@dataclass
class BuildResult:
    """What a build subprocess left: exit status and its captured output."""

    returncode: int
    stdout: str
    stderr: str


#: build subprocesses started by this process (tests read it to prove a cache hit)
BUILD_COUNT = 0
#: where this process's last C++ module came from: "shared" (the harness's shared build cache,
#: filled ahead of time), "private" (this process's own cache), "built" (compiled now)
LAST_BUILD_SOURCE: str | None = None


def run_build(cmd: list[str], cwd: str | os.PathLike | None, env: dict[str, str] | None,
              timeout: float) -> BuildResult:
    """Run one build command: the single place a language build starts a process (the
    sandbox wraps it here).

    The command runs in a new session (its own process group); when it runs past
    ``timeout`` seconds the whole group (ninja, nvcc, cicc, ptxas, ...) is killed and
    :class:`BuildTimeout` raised. Output is captured as text.
    """
    global BUILD_COUNT
    BUILD_COUNT += 1
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise BuildTimeout(f"build timed out after {timeout:.0f} s") from None
    return BuildResult(proc.returncode, out, err)


def check_requirements(solution: Solution, device: str) -> None:
    """Raise :class:`BuildError` (one line) when a language of ``solution`` cannot be built
    or run here: the GPU first (installing cannot fix it), then each toolchain."""
    langs = _languages.for_languages(solution.spec.languages)
    try:
        for lang in langs:
            lang.check_device(device)
        for lang in langs:
            lang.check_toolchain(solution)
    except ToolchainMissing as e:
        raise BuildError(str(e)) from None


def solution_dir(solution: Solution) -> Path:
    d = cache_dir() / "solutions" / solution.content_hash()[:20]
    d.mkdir(parents=True, exist_ok=True)
    for s in solution.sources:
        p = d / s.path
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists() or p.read_text() != s.content:
            p.write_text(s.content)
    return d


def toolchain_fingerprint(solution: Solution, device: str) -> dict[str, Any]:
    """Everything besides the sources that changes a C++ build's output: torch and its CUDA,
    nvcc, the host compiler, the plug-ins' package versions, the GPU's compute capability."""
    import torch

    fp: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                          "device": str(device).split(":")[0]}
    if str(device).startswith("cuda"):
        fp["sm"] = gpu_identity(device)[1]
    if any(s.path.lower().endswith((".cu", ".cuh")) for s in solution.sources) and cuda_home():
        fp["nvcc"] = tool_version((str(Path(cuda_home()) / "bin" / "nvcc"), "--version"))
    fp["cxx"] = tool_version((os.environ.get("CXX", "c++"), "-dumpfullversion", "-dumpversion"))
    for lang in _languages.for_languages(solution.spec.languages):
        fp.update({k: v for k, v in lang.toolchain_versions(solution).items()})
    return fp


def cpp_build_key(solution: Solution, device: str) -> str:
    """Build-cache key: sha256 of sources, compile options, languages and toolchain."""
    opts = solution.spec.compile_options.model_dump() if solution.spec.compile_options else {}
    blob = json.dumps(
        {"sources": [(s.path, s.content) for s in solution.sources], "opts": opts,
         "languages": solution.spec.languages, "toolchain": toolchain_fingerprint(solution, device)},
        sort_keys=True, default=str,
    ).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


#: compiler / linker diagnostics that state the cause of a failure (gcc/clang
#: ``file:line:col: error:``, nvcc ``file(line): error:``, ``fatal error``, the linker's)
_DIAGNOSTIC = re.compile(
    r"(\berror\b\s*[:#]|fatal error|undefined reference|undefined symbol|cannot find -l"
    r"|No such file or directory)", re.IGNORECASE)
#: anything else that reads like a cause (Python exceptions of the build driver)
_GENERIC = re.compile(r"(\berror\b|not found|Exception|Error:)", re.IGNORECASE)
_NOISE_LINE = re.compile(r"^(FAILED:|ninja: build stopped|\[\d+/\d+\]|Traceback|  File |subprocess\.)")


def first_error_line(log: str) -> str | None:
    """The first line of a build log that states a cause: a compiler or linker diagnostic
    (``kernel.cu(3): error: ...``, ``fatal error: cutlass/gemm/device/gemm.h: No such file or
    directory``) before any other error-like line; ninja's progress, ``FAILED:`` echoes and
    the build driver's wrapping exception (which repeats the whole log on one line) are
    skipped. None when no line does."""
    lines = [ln.strip() for ln in log.splitlines()]
    lines = [ln for ln in lines if ln and not _NOISE_LINE.match(ln)
             and "Error building extension" not in ln and len(ln) <= 2000]
    for pattern in (_DIAGNOSTIC, _GENERIC):
        for ln in lines:
            if pattern.search(ln):
                return ln[:300]
    return None


def _cpp_job(solution: Solution, key: str, build_dir: Path, src_dir: Path) -> dict:
    opts = solution.spec.compile_options
    langs = _languages.for_languages(solution.spec.languages)
    include = [str(src_dir)]
    ld = list(opts.ld_flags) if opts else []
    for lang in langs:
        include += [d for d in lang.extra_include_dirs() if d not in include]
        ld += [f for f in lang.extra_ld_flags(solution) if f not in ld]
    return {
        "name": f"solbench_cpp_{key}",
        "sources": [str(src_dir / s.path) for s in solution.sources
                    if s.path.lower().endswith(CPP_COMPILED_SUFFIXES)],
        "build_directory": str(build_dir),
        "cflags": opts.cflags if opts else [],
        "cuda_cflags": opts.cuda_cflags if opts else [],
        "ld_flags": ld,
        "include": include,
    }


def built_module(build_dir: Path) -> Path | None:
    """The module a finished build left in ``build_dir`` (named by its ``module_path.txt``,
    looked up in ``build_dir`` itself, so a build directory can be moved), or None."""
    try:
        name = Path((build_dir / "module_path.txt").read_text().strip()).name
    except (OSError, UnicodeDecodeError):
        return None
    so = build_dir / name
    return so if name and so.is_file() else None


def build_cpp(solution: Solution, device: str, timeout_s: float) -> Path:
    """Compile a C++-family solution in a subprocess; return the built module's path.

    A finished build with the same :func:`cpp_build_key` is returned without compiling:
    first from the harness's shared build cache (``$SOLBENCH_BUILD_CACHE/cpp/<key>``, filled
    ahead of time by :mod:`solbench.harness.prebuild`), then from this process's own cache.
    An ahead-of-time build worker (``$SOLBENCH_BUILD_OUT`` set) compiles into that directory.
    Raises BuildError whose first line is the reason (the first compiler error line, or the
    timeout) and whose remaining lines are the log tail.
    """
    global LAST_BUILD_SOURCE
    key = cpp_build_key(solution, device)
    shared = paths.build_cache_dir()
    if shared:
        so = built_module(Path(shared) / "cpp" / key)
        if so is not None:
            LAST_BUILD_SOURCE = "shared"
            return so
    out = paths.build_out()
    build_dir = Path(out) if out else cache_dir() / "cpp" / key
    build_dir.mkdir(parents=True, exist_ok=True)
    done = build_dir / "module_path.txt"
    so = built_module(build_dir)
    if so is not None:
        LAST_BUILD_SOURCE = "private"
        return so
    src_dir = solution_dir(solution)
    job = _cpp_job(solution, key, build_dir, src_dir)
    if not job["sources"]:
        raise BuildError(f"no {'/'.join(CPP_COMPILED_SUFFIXES)} source among the solution's sources")
    lang = solution.spec.language.name
    env = {**os.environ, "MAX_JOBS": os.environ.get("MAX_JOBS", "4")}
    try:
        res = run_build([sys.executable, "-m", "solbench.harness.build_cpp", json.dumps(job)],
                        cwd=str(build_dir), env=env, timeout=timeout_s)
    except BuildTimeout:
        # the killed build leaves torch's FileBaton lock behind; a later build of the same
        # source would wait on it forever
        (build_dir / "lock").unlink(missing_ok=True)
        raise BuildError(f"{lang}: C++ build timed out after {timeout_s:.0f} s") from None
    if res.returncode != 0:
        # the solution's own paths relative (kernel.cu:3:1, not /cache/solutions/<hash>/...)
        log = (res.stdout + res.stderr).replace(str(src_dir) + "/", "")
        why = first_error_line(log) or f"exit {res.returncode}"
        raise BuildError(f"{lang}: C++ build failed: {why}\n{log[-5000:]}")
    path = res.stdout.strip().splitlines()[-1]
    done.write_text(path)
    LAST_BUILD_SOURCE = "built"
    return Path(path)


def _install_hint_for(e: BaseException) -> str:
    """`` (pip install 'solbench[cute-dsl]')`` when ``e`` is a missing module some language's
    extra provides (a solution that imports a DSL its spec does not list), else ''."""
    name = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
    if not name:
        return ""
    top = name.split(".")[0]
    for lang in _languages.LANGUAGES.values():
        for r in lang.requirements:
            if r.module and r.extra and r.module.split(".")[0] == top and (
                    r.module == name or "." not in r.module):
                return f" ({_languages.install_hint(r.extra)})"
    return ""


def _read_only(path: str) -> bool:
    """Whether ``path`` lies on a read-only mount (``statvfs``'s ST_RDONLY)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _private_pycache() -> None:
    """Bytecode of this process goes to (and is read from) a fresh private directory, never
    the shared cache's ``__pycache__`` folders, where another candidate (same user) could plant
    a ``.pyc`` that later candidates, or the reference's own worker, would then execute.
    Except the parent's bytecode cache where the sandbox shows it read-only
    (:data:`solbench.bytecode.MOUNT`): nothing can be planted there, and it holds what the
    worker imports after the build (torch.compile's and Triton's packages, compiled by the
    parent: solbench/bytecode.py), which a private directory would make it compile again."""
    from .. import bytecode

    if sys.pycache_prefix == bytecode.MOUNT and _read_only(bytecode.MOUNT):
        return
    if not getattr(sys, "_solbench_pycache", None):
        import tempfile

        sys.pycache_prefix = tempfile.mkdtemp(prefix="solbench-pyc-")
        sys._solbench_pycache = sys.pycache_prefix


def _import_path(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_entry(solution: Solution, device: str, init_args: tuple, init_seed: int,
               build_timeout_s: float) -> tuple[Callable[..., Any], dict]:
    """Build/import the solution and return (callable, info).

    Class entry points (KernelBench ``ModelNew``) are constructed with ``init_args`` after
    ``torch.manual_seed(init_seed)``, moved to ``device`` and put in eval mode.
    Raises BuildError for any failure to build, import or find the entry point.
    """
    import torch

    info: dict[str, Any] = {"languages": solution.spec.languages,
                            "language": solution.spec.language.name}
    check_requirements(solution, device)
    try:
        if solution.spec.is_cpp:
            so = build_cpp(solution, device, build_timeout_s)
            info["module_path"] = str(so)
            info["build_cache"] = LAST_BUILD_SOURCE
            info["build_key"] = cpp_build_key(solution, device)
            modname = so.name.split(".")[0]
            mod = _import_path(so, modname)
        else:
            _private_pycache()
            d = solution_dir(solution)
            if str(d) not in sys.path:
                sys.path.insert(0, str(d))
            from ..spec.reference import module_from_text, register_source

            for src in solution.sources:  # every source file's text, from the solution itself
                register_source(d / src.path, src.content)
            modname = "solbench_candidate_" + solution.content_hash()[:12]
            mod = module_from_text(d / solution.spec.entry_file, modname,
                                   solution.source(solution.spec.entry_file))
    except BuildError:
        raise
    except BaseException as e:  # noqa: BLE001 - any import-time failure is a compile error
        if isinstance(e, (KeyboardInterrupt,)):
            raise
        import traceback

        hint = _install_hint_for(e)
        raise BuildError(f"{type(e).__name__}: {e}{hint}\n{traceback.format_exc()[-4000:]}") from None
    sym = solution.spec.entry_symbol
    obj = getattr(mod, sym, None)
    if obj is None:
        raise BuildError(f"entry point {solution.spec.entry_point!r}: {sym!r} is not defined")
    if inspect.isclass(obj):
        try:
            torch.manual_seed(init_seed)
            inst = obj(*init_args)
            if isinstance(inst, torch.nn.Module):
                inst = inst.to(device)
                inst.eval()
        except BaseException as e:  # noqa: BLE001
            import traceback

            raise BuildError(
                f"constructing {sym}: {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
            ) from None
        info["entry_kind"] = "class"
        return inst, info
    if not callable(obj):
        raise BuildError(f"entry point {solution.spec.entry_point!r} is not callable")
    info["entry_kind"] = "function"
    return obj, info
