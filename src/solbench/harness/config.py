"""Evaluation settings and the choices made from them before any worker starts:
:class:`EvalConfig`, the workload selection, the environment record."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..errors import SpecError
from ..spec.problem import Problem
from ..spec.trace import Environment
from ..spec.workload import Workload


@dataclass
class EvalConfig:
    """Evaluation settings (None = the device's default).

    Attributes:
        device: "cpu" or "cuda[:i]".
        workloads: uuids (or unique prefixes) or indices to evaluate; None = all.
        max_workloads: keep at most this many (after ``workloads``).
        rounds: correctness rounds with fresh inputs (>= 5 recommended; upstream uses 5).
        warmup: untimed calls before timing.
        iters: timed iterations, a fixed count. None (default): an adaptive count
            (:mod:`solbench.harness.stopping`) between ``min_iters`` and 50 on CUDA; 16 on
            the CPU (4 blocks of 4 per side: a resolved CPU speedup needs 4 block pairs,
            ``harness.resolution``).
        min_iters: the adaptive count's minimum (default 20 on CUDA, 16 on the CPU, where
            the count is then fixed); ignored when ``iters`` is given.
        blocks: timed blocks per side, interleaved C R R C ... with the eager reference's
            (default 2 on CUDA, 4 on the CPU; fewer when a block would hold fewer than 4
            calls: :meth:`n_blocks`).
        noise_target: the adaptive count stops once the median's notch interval
            (1.57 IQR / sqrt(n)) is within this fraction of the median (default 0.01).
        pool_bytes: memory budget for the slot pool (default 16 GiB CUDA, 1 GiB CPU).
        max_pool: most slots (distinct addresses) kept at once.
        verify: at least this many timed iterations are verified against the reference;
            ``verify_fraction`` of them when that is more. Which ones is drawn from the OS's
            secure random source after nothing of the sample was announced.
        timing / reference_timing: measure the candidate / the eager reference.
        cupti: use torch.profiler (Kineto/CUPTI) device activity on CUDA.
        cupti_markers: how the timed sessions find the flush and end markers
            (``harness.timing.MARKER_METHODS``): "streams" (default; CUDA activity only,
            the worker's own marker and copy streams: the profiler records no op on the
            host, whose recording sits between a launch-bound call's launches) or "ranges"
            (CPU and CUDA activity, record_function ranges; the fallback where marker streams
            cannot be made).
        precision_check: compare errors against an fp64 truth on round 0.
        build_timeout_s: limit (s) of the build (import, C++/CUDA compile, class
            construction). Default 600 s.
        first_call_timeout_s: limit (s) of a workload's first call, which pays JIT
            compilation and autotuning (torch.compile max-autotune, Triton autotune).
            Default 300 s.
        call_timeout_s: limit (s) of every later call. None (default): the larger of
            ``call_timeout_floor_s`` and ``call_timeout_factor`` x the slowest reference
            call the parent ran for this workload.
        keep_going: after a TIMEOUT, evaluate the solution's remaining workloads anyway
            (default: they are recorded as TIMEOUT with the finding
            ``skipped_after_timeout`` and not run).
        seed: base seed of the inputs; workload j, input set r uses sha256(seed, j, r). None
            (default): every input set's seed is drawn from the OS's random source
            (``secrets``) when that set is made, so nothing stored in any process predicts a
            later input; the seeds are written to the traces (``input_seeds``) only when
            they are made. Give one only to reproduce a run.
        log_cap: characters of worker log kept per trace.
        spare_workers: workers a run of several pairs keeps started ahead of need
            (:class:`solbench.harness.workers.SparePool`: spawned, torch imported, CUDA and
            CUPTI started, no candidate code, stopped during every timed window); a pair's
            candidate and reference workers are taken from them. 0: every worker starts
            when it is needed. Used by the suite runner (``solbench run``) and the demo; a
            single :func:`~solbench.harness.evaluate` starts none.
        on_trace: called with each Trace as soon as its workload is finished (progress,
            streaming to a results file); an exception it raises propagates.
    """

    device: str = "cpu"
    workloads: list[str] | None = None
    max_workloads: int | None = None
    rounds: int = 5
    warmup: int | None = None
    iters: int | None = None
    min_iters: int | None = None
    blocks: int | None = None
    noise_target: float = 0.01
    pool_bytes: int | None = None
    max_pool: int = 8
    verify: int = 5
    verify_fraction: float = 0.2
    timing: bool = True
    reference_timing: bool = True
    cupti: bool = True
    cupti_markers: str = "streams"
    precision_check: bool = True
    build_timeout_s: float = 600.0
    first_call_timeout_s: float = 300.0
    call_timeout_s: float | None = None
    call_timeout_floor_s: float = 10.0
    call_timeout_factor: float = 50.0
    keep_going: bool = False
    seed: int | None = None
    log_cap: int = 8192
    spare_workers: int = 2
    progress: Callable[[str, int, int], None] | None = None
    on_trace: Callable[[Any], None] | None = None

    def __post_init__(self) -> None:
        if self.cupti_markers not in ("ranges", "streams"):
            raise ValueError(f"cupti_markers: 'ranges' or 'streams', got {self.cupti_markers!r}")

    def set_timeout(self, seconds: float) -> None:
        """``--timeout``: one limit (s) for every call, the first included."""
        if not seconds > 0:
            raise ValueError(f"timeout must be > 0 s, got {seconds}")
        self.call_timeout_s = float(seconds)
        self.first_call_timeout_s = float(seconds)

    def later_call_timeout(self, reference_call_s: float) -> float:
        """Limit (s) of the calls after a workload's first one (see ``call_timeout_s``)."""
        if self.call_timeout_s is not None:
            return self.call_timeout_s
        return max(self.call_timeout_floor_s, self.call_timeout_factor * max(reference_call_s, 0.0))

    @property
    def is_cuda(self) -> bool:
        return torch.device(self.device).type == "cuda"

    def n_iters(self) -> int:
        return self.iters if self.iters is not None else (50 if self.is_cuda else 16)

    def n_iters_min(self) -> int:
        """Fewest timed iterations per side: ``iters`` when given (a fixed count), else
        ``min_iters`` (default 20 on CUDA, 16 on the CPU), never above :meth:`n_iters`."""
        if self.iters is not None:
            return self.iters
        m = self.min_iters if self.min_iters is not None else (20 if self.is_cuda else 16)
        return max(2, min(m, self.n_iters()))

    def n_blocks(self, n: int) -> int:
        """Timed blocks per side for ``n`` calls per side: ``blocks`` (default 2 on CUDA,
        4 on the CPU), fewer when a block would hold fewer than 4 calls (the first-call
        outlier check judges blocks of 4 or more), at least 1."""
        b = self.blocks if self.blocks is not None else (2 if self.is_cuda else 4)
        return max(1, min(b, n // 4))

    def n_warmup(self) -> int:
        return self.warmup if self.warmup is not None else (5 if self.is_cuda else 2)

    def budget(self) -> int:
        return self.pool_bytes if self.pool_bytes is not None else ((16 << 30) if self.is_cuda else (1 << 30))

    def n_slots(self, workload_bytes: int) -> int:
        """Slots (distinct input/output addresses) of a workload of ``workload_bytes`` (its
        inputs and outputs, bytes): as many as fit in :meth:`budget`, 2 to ``max_pool``; 1 when
        two would not fit (or without timing).

        Why one is enough there: every timed call gets values never seen before in whatever
        slot it uses (docs/harness.md, Timing), so a second address adds no protection a fresh
        fill lacks, and a workload that large (8 GiB and more on CUDA) is far beyond any cache
        the flush clears. Two copies of such a workload, in each of the two workers' pools,
        beside the parent's input sets and both sides' temporaries, filled a 141 GB H200 and an
        honest reference ended RUNTIME_ERROR (out of memory) as its own candidate
        (bench/results/device_s11: L1/013 at batch 64 x seq 8192 x hidden 2560, 18.8 GB a set)."""
        if not self.timing:
            return 1
        fit = self.budget() // max(int(workload_bytes), 1)
        return int(min(self.max_pool, fit)) if fit >= 2 else 1


def environment(device: str) -> Environment:
    libs = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton  # noqa: F401

        libs["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        libs["cuda"] = str(torch.version.cuda)
        hw = torch.cuda.get_device_name(torch.device(device))
    else:
        hw = f"CPU {platform.machine()} ({platform.processor() or 'unknown'})"
    from .sandbox import sandbox_status

    st = sandbox_status(device)
    box = {"mode": st["mode"], "namespaces": st["namespaces"], "seccomp": st["seccomp"],
           "warning": st["warning"], "tasks": st["tasks"], "memory": st["memory"]}
    return Environment(hardware=hw, libs=libs, sandbox=box)


def select_workloads(problem: Problem, cfg: EvalConfig) -> list[Workload]:
    ws = problem.workloads
    if cfg.workloads:
        out = []
        for key in cfg.workloads:
            if key.isdigit() and int(key) < len(ws):
                out.append(ws[int(key)])
                continue
            hits = [w for w in ws if w.uuid == key] or [w for w in ws if w.uuid.startswith(key)]
            if len(hits) != 1:
                raise SpecError(problem.path, "workloads",
                                f"{key!r} matches {len(hits)} workloads (need exactly one)")
            out.append(hits[0])
        ws = out
    if cfg.max_workloads is not None:
        ws = ws[: cfg.max_workloads]
    return ws
