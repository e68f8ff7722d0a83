"""Ahead-of-time C++ builds into the harness's shared build cache.

A C++-family solution normally compiles inside its candidate worker when the worker builds
it (:func:`solbench.harness.build.load_entry`), in that worker's private cache, which dies
with the worker. :func:`prebuild` runs that same build step (the worker's ``build`` op:
requirement checks, :func:`~solbench.harness.build.build_cpp`, the import of the module)
earlier, in a worker of its own with the same sandbox, whose only writable host directory
is a fresh staging directory. When the build succeeds the harness seals the staging
directory and files it under ``$SOLBENCH_BUILD_CACHE/cpp/<key>``, the key being the
harness's own :func:`~solbench.harness.build.cpp_build_key` of the solution (sources,
options, languages, toolchain, GPU); the candidate never names the key it is filed under.
Later candidate workers see the cache read-only (:func:`solbench.harness.sandbox.shared_build_cache`)
and load the module from there instead of compiling (``evaluation.build_cache == "shared"``).

Several solutions build at once with :func:`prebuild_many` (threads, one worker each); no
timing runs meanwhile in the caller's plan (bench/languages_device.py builds first, then
evaluates one solution after another).

What a build could leave behind reaches only its own key: a worker can write nothing but its
staging directory, and a later worker reads ``cpp/<key>`` only for its own key, which it can
compute only from the exact sources.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import paths
from ..spec.problem import Problem
from ..spec.solution import Solution
from . import protocol
from .build import BuildError, built_module, check_requirements, cpp_build_key
from .config import EvalConfig
from .process import ProtocolError, WorkerDied, WorkerHandle, WorkerTimeout

#: the ``cpp`` folder of the shared cache: traversable, not listable (owner wx, others x)
CPP_DIR_MODE = 0o311


def cache_root() -> Path:
    """The shared build cache, ``$SOLBENCH_BUILD_CACHE`` (set before any worker starts: the
    sandbox binds it into every worker), created with its ``cpp`` folder unlistable.
    Raises ValueError when it is not set."""
    p = paths.build_cache_dir()
    if not p:
        raise ValueError("SOLBENCH_BUILD_CACHE is not set: no shared build cache to fill")
    root = Path(p).resolve()
    (root / "cpp").mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    os.chmod(root / "cpp", CPP_DIR_MODE)
    return root


def _seal(d: Path) -> None:
    """Make a finished build directory the harness's and read-only for everyone else:
    regular files and folders only (symbolic links are neither followed nor kept)."""
    me = os.geteuid()
    for dirpath, dirnames, filenames in os.walk(d, topdown=False):
        for name in filenames + dirnames:
            p = Path(dirpath, name)
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode) or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                p.unlink()
                continue
            if st.st_uid != me:
                os.chown(p, me, os.getegid(), follow_symlinks=False)
            os.chmod(p, 0o755 if stat.S_ISDIR(st.st_mode) else 0o644)
    if d.stat().st_uid != me:
        os.chown(d, me, os.getegid())
    os.chmod(d, 0o755)


def _request(problem: Problem, solution: Solution, cfg: EvalConfig) -> protocol.Build:
    return protocol.Build(solution=solution.model_dump_json(), init_args=list(problem.init_args),
                          init_seed=problem.init_seed, build_timeout_s=cfg.build_timeout_s)


def prebuild(problem: Problem, solution: Solution, cfg: EvalConfig) -> dict[str, Any]:
    """Build ``solution`` ahead of time into the shared build cache (:func:`cache_root`).

    Returns ``{"status", "key", "seconds", "reason"}``: status "built" (filed under
    ``cpp/<key>``), "cached" (already there: nothing run), "failed" (the one-line reason:
    the first line of the build's COMPILE_ERROR, a missing toolchain, a timeout; the
    evaluation then reports the same), "skipped" (a Python-family solution: nothing to
    compile ahead). Never raises for a candidate's failure.
    """
    t0 = time.perf_counter()

    def done(status: str, key: str | None = None, reason: str = "") -> dict[str, Any]:
        return {"status": status, "key": key, "seconds": round(time.perf_counter() - t0, 3),
                "reason": reason.splitlines()[0][:300] if reason else ""}

    if not solution.spec.is_cpp:
        return done("skipped", reason="Python family: compiled at import in its worker")
    try:
        check_requirements(solution, cfg.device)  # the same one line the worker would send
    except BuildError as e:
        return done("failed", reason=str(e))
    root = cache_root()
    key = cpp_build_key(solution, cfg.device)
    final = root / "cpp" / key
    if built_module(final) is not None:
        return done("cached", key)
    stage = Path(tempfile.mkdtemp(prefix=f".stage-{key}-", dir=root / "cpp"))
    h = None
    try:
        try:
            h = WorkerHandle(cfg.device, build_out=str(stage))
            rep = protocol.request(h, _request(problem, solution, cfg),
                                   timeout_s=cfg.build_timeout_s + 60)
        except WorkerTimeout as e:
            return done("failed", key, f"build timed out: {e}")
        except (WorkerDied, ProtocolError, protocol.ReplyInvalid) as e:
            return done("failed", key, f"worker failed while building: {e}")
        if isinstance(rep, protocol.CompileErrorReply):
            return done("failed", key, rep.message)
        if isinstance(rep, protocol.ErrorReply):
            return done("failed", key, f"{rep.type}: {rep.message}")
        if built_module(stage) is None:
            return done("failed", key, "the build left no module in its output directory")
        h.close()
        h = None
        _seal(stage)
        try:
            os.rename(stage, final)
        except OSError:  # filed meanwhile by another build of the same key
            if built_module(final) is None:
                raise
            return done("cached", key)
        if rep.build_key and rep.build_key != key:
            # the worker computed another key (a toolchain seen differently): the evaluation
            # will compile again; said so, never hidden
            return done("built", key, f"key mismatch: worker {rep.build_key}, harness {key}")
        return done("built", key)
    finally:
        if h is not None:
            h.kill()
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def prebuild_many(items: list[tuple[Problem, Solution]], cfg: EvalConfig, jobs: int = 4,
                  on_done=None) -> list[dict[str, Any]]:
    """:func:`prebuild` each (problem, solution) on ``jobs`` threads; results in input order.
    ``on_done(index, result)`` is called as each finishes (from its thread)."""
    cache_root()
    out: list[dict[str, Any]] = [{}] * len(items)

    def one(i: int) -> None:
        try:
            r = prebuild(items[i][0], items[i][1], cfg)
        except Exception as e:  # noqa: BLE001 - one build's harness error is its row
            r = {"status": "failed", "key": None, "seconds": 0.0,
                 "reason": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
        out[i] = r
        if on_done is not None:
            on_done(i, r)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(one, range(len(items))))
    return out
