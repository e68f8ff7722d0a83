"""Build step per language, run inside the worker (candidate side) except the C++ compile,
which runs in its own subprocess with a timeout.

- pytorch / triton / other Python-family languages: sources are written to
  ``<cache>/solutions/<hash>/`` and the entry file is imported from there.
- cuda_cpp / cutlass / cudnn / cublas: compiled with ``torch.utils.cpp_extension.load`` in a
  separate ``python -m solbench.harness.build_cpp`` process (so a hanging nvcc or a crash
  cannot take the worker down), with a build cache keyed by the sha256 of sources, flags,
  torch version and device; the module binds ``run`` itself (pybind11).
- KernelBench candidates that call ``load_inline`` compile at import time, inside the worker.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from ..spec.reference import cache_dir
from ..spec.solution import Solution


class BuildError(Exception):
    """The candidate failed to build or import (recorded as COMPILE_ERROR)."""


def solution_dir(solution: Solution) -> Path:
    d = cache_dir() / "solutions" / solution.content_hash()[:20]
    d.mkdir(parents=True, exist_ok=True)
    for s in solution.sources:
        p = d / s.path
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists() or p.read_text() != s.content:
            p.write_text(s.content)
    return d


def cpp_build_key(solution: Solution, device: str) -> str:
    import torch

    opts = solution.spec.compile_options.model_dump() if solution.spec.compile_options else {}
    blob = json.dumps(
        {"sources": [(s.path, s.content) for s in solution.sources], "opts": opts,
         "torch": torch.__version__, "cuda": torch.version.cuda, "device": device},
        sort_keys=True,
    ).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def build_cpp(solution: Solution, device: str, timeout_s: float) -> Path:
    """Compile a C++-family solution in a subprocess; return the built module's path.

    Raises BuildError with the compiler log tail on failure or timeout.
    """
    key = cpp_build_key(solution, device)
    build_dir = cache_dir() / "cpp" / key
    build_dir.mkdir(parents=True, exist_ok=True)
    done = build_dir / "module_path.txt"
    if done.exists() and Path(done.read_text().strip()).exists():
        return Path(done.read_text().strip())
    src_dir = solution_dir(solution)
    job = {
        "name": f"solbench_cpp_{key}",
        "sources": [str(src_dir / s.path) for s in solution.sources
                    if s.path.endswith((".cpp", ".cc", ".cu", ".cxx"))],
        "build_directory": str(build_dir),
        "cflags": (solution.spec.compile_options.cflags if solution.spec.compile_options else []),
        "cuda_cflags": (solution.spec.compile_options.cuda_cflags if solution.spec.compile_options else []),
        "ld_flags": (solution.spec.compile_options.ld_flags if solution.spec.compile_options else []),
        "include": str(src_dir),
    }
    if not job["sources"]:
        raise BuildError("no .cpp/.cc/.cu source among the solution's sources")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "solbench.harness.build_cpp", json.dumps(job)],
            capture_output=True, text=True, timeout=timeout_s,
            env={**os.environ, "MAX_JOBS": os.environ.get("MAX_JOBS", "4")},
        )
    except subprocess.TimeoutExpired:
        # the killed build leaves torch's FileBaton lock behind; a later build of the same
        # source would wait on it forever
        (build_dir / "lock").unlink(missing_ok=True)
        raise BuildError(f"C++ build timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        log = (proc.stdout + proc.stderr)[-6000:]
        raise BuildError(f"C++ build failed (exit {proc.returncode}):\n{log}")
    path = proc.stdout.strip().splitlines()[-1]
    done.write_text(path)
    return Path(path)


def _private_pycache() -> None:
    """Bytecode of this process goes to (and is read from) a fresh private directory, never
    the shared cache's ``__pycache__`` folders, where another candidate (same user) could plant
    a ``.pyc`` that later candidates, or the reference's own worker, would then execute."""
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

    info: dict[str, Any] = {"languages": solution.spec.languages}
    try:
        if solution.spec.is_cpp:
            so = build_cpp(solution, device, build_timeout_s)
            info["module_path"] = str(so)
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

        raise BuildError(f"{type(e).__name__}: {e}\n{traceback.format_exc()[-4000:]}") from None
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
