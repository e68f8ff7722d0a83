"""The evaluation settings, :class:`EvalConfig`: one pydantic model, every field bounded.

A value out of bounds is refused where the configuration is made, with the field named
(``EvalConfig(iters=0)`` raises pydantic's ValidationError, a ValueError); the CLI turns that
into one line naming the option (``error: --iters: must be >= 1, got 0``, exit 2) through
:func:`explain`. The model is frozen: a changed setting is a new configuration
(``dataclasses.replace(cfg, iters=8)``, validated again), so no stage changes what another
stage already read.

The bounded types below (:data:`Seconds`, :data:`Rounds`, ...) are shared with the
service's request body (:class:`solbench.serve.api.EvalRequest`), so a setting a user may give
``solbench eval`` and the server accept cannot drift apart.

This module imports nothing of solbench's and not torch: the CLI checks its options before
anything heavy is imported.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Callable, Literal, Mapping, Optional

from pydantic import ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass

#: the longest time limit a setting accepts (s): one day. Above it a "limit" no longer bounds
#: anything a run would wait for.
MAX_SECONDS = 86_400.0

#: a time limit (s): positive, finite, at most :data:`MAX_SECONDS`
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
#: correctness rounds: each draws fresh inputs and runs candidate and reference once
Rounds = Annotated[int, Field(ge=1, le=1000)]
#: timed iterations per side: a fixed count
Iters = Annotated[int, Field(ge=1, le=100_000)]
#: a base seed of the inputs (sha256 of its decimal text derives every set: any size works;
#: 256 bits is more than any secret needs)
Seed = Annotated[int, Field(ge=0, lt=1 << 256)]
#: the devices solbench runs on: ``cpu``, ``cuda`` or ``cuda:N`` (N < 100)
DEVICE_PATTERN = r"^(cpu|cuda(:\d{1,2})?)$"
#: a device (``auto`` is resolved before: :func:`solbench.cli.common.check_device`)
Device = Annotated[str, Field(pattern=DEVICE_PATTERN)]
#: a fraction in [0, 1]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]

_FROZEN = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


@dataclass(frozen=True, config=_FROZEN)
class EvalConfig:
    """Evaluation settings (None = the device's default). Frozen; every field bounded (the
    bound after each name).

    Attributes:
        device: "cpu", "cuda" or "cuda:N".
        workloads: uuids (or unique prefixes) or indices to evaluate; None = all.
        max_workloads (>= 1): keep at most this many (after ``workloads``).
        rounds (1-1000): correctness rounds with fresh inputs (>= 5 recommended; upstream
            uses 5).
        warmup (>= 0): untimed calls before timing.
        iters (1-100000): timed iterations, a fixed count. None (default): an adaptive count
            (:mod:`solbench.harness.stopping`) between ``min_iters`` and 50 on CUDA; 16 on
            the CPU (4 blocks of 4 per side: a resolved CPU speedup needs 4 block pairs,
            ``harness.resolution``).
        min_iters (>= 1): the adaptive count's minimum (default 20 on CUDA, 16 on the CPU,
            where the count is then fixed; never below 2); ignored when ``iters`` is given.
        blocks (>= 1): timed blocks per side, interleaved C R R C ... with the eager
            reference's (default 2 on CUDA, 4 on the CPU; fewer when a block would hold fewer
            than 4 calls: :meth:`n_blocks`).
        noise_target (0-1, exclusive): the adaptive count stops once the median's notch
            interval (1.57 IQR / sqrt(n)) is within this fraction of the median (default 0.01).
        pool_bytes (>= 1): memory budget for the slot pool (default 16 GiB CUDA, 1 GiB CPU).
        max_pool (>= 1): most slots (distinct addresses) kept at once.
        verify (>= 0): at least this many timed iterations are verified against the
            reference; ``verify_fraction`` (0-1) of them when that is more. Which ones is
            drawn from the OS's secure random source after nothing of the sample was announced.
        timing / reference_timing: measure the candidate / the eager reference.
        cupti: time with CUPTI device activity on CUDA (cupti-python's activity records in
            the "streams" method when installed, else torch.profiler's).
        cupti_markers: how the timed sessions find the flush and end markers
            (``harness.timing.MARKER_METHODS``): "streams" (default; CUDA activity only,
            the worker's own marker and copy streams: the profiler records no op on the
            host, whose recording sits between a launch-bound call's launches) or "ranges"
            (CPU and CUDA activity, record_function ranges; the fallback where marker streams
            cannot be made).
        precision_check: compare errors against an fp64 truth on round 0.
        build_timeout_s (s, > 0, finite, <= 1 day): limit of the build (import, C++/CUDA
            compile, class construction). Default 600 s: a CUDA extension of a few files
            compiles in 1-3 minutes with nvcc; CUTLASS templates take longer.
        first_call_timeout_s (s, same bounds): limit of a workload's first call, which pays
            JIT compilation and autotuning (torch.compile max-autotune, Triton autotune).
            Default 300 s.
        call_timeout_s (s, same bounds): limit of every later call. None (default): the
            larger of ``call_timeout_floor_s`` and ``call_timeout_factor`` x the slowest
            reference call the parent ran for this workload.
        call_timeout_floor_s (s, same bounds): default 10 s, far above any launch or
            synchronisation an honest call pays, short enough that a hung call costs little.
        call_timeout_factor (> 0, finite): default 50 (a candidate 50x slower than the eager
            reference is not worth timing further).
        keep_going: after a TIMEOUT, evaluate the solution's remaining workloads anyway
            (default: they are recorded as TIMEOUT with the finding
            ``skipped_after_timeout`` and not run).
        seed (0 <= seed < 2**256): base seed of the inputs; workload j, input set r uses
            sha256(seed, j, r). None (default): every input set's seed is drawn from the OS's
            random source (``secrets``) when that set is made, so nothing stored in any
            process predicts a later input; the seeds are written to the traces
            (``input_seeds``) only when they are made. Give one only to reproduce a run.
        log_cap (>= 0): characters of worker log kept per trace.
        spare_workers (0-64): workers a run of several pairs keeps started ahead of need
            (:class:`solbench.harness.workers.SparePool`: spawned, torch imported, CUDA and
            CUPTI started, no candidate code, stopped during every timed window); a pair's
            candidate and reference workers are taken from them. None (default): 2 on CUDA,
            0 on the CPU (there their start-up competes for the cores the timed calls use: a
            reference was once flagged implausible under that load);
            0: every worker starts when it is needed (:meth:`n_spare_workers`). Used by the
            suite runner (``solbench run``) and the demo; a single
            :func:`~solbench.harness.evaluate` starts none.
        progress: called with (workload uuid, index, count) as each workload starts.
        on_trace: called with each Trace as soon as its workload is finished (progress,
            streaming to a results file); an exception it raises propagates.

    Raises pydantic.ValidationError (a ValueError) naming the field for a value out of bounds
    or an unknown field.
    """

    device: Device = "cpu"
    workloads: Optional[list[Annotated[str, Field(min_length=1)]]] = None
    max_workloads: Optional[Annotated[int, Field(ge=1)]] = None
    rounds: Rounds = 5
    warmup: Optional[Annotated[int, Field(ge=0, le=100_000)]] = None
    iters: Optional[Iters] = None
    min_iters: Optional[Annotated[int, Field(ge=1, le=100_000)]] = None
    blocks: Optional[Annotated[int, Field(ge=1, le=1000)]] = None
    noise_target: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 0.01
    pool_bytes: Optional[Annotated[int, Field(ge=1)]] = None
    max_pool: Annotated[int, Field(ge=1, le=1024)] = 8
    verify: Annotated[int, Field(ge=0)] = 5
    verify_fraction: Fraction = 0.2
    timing: bool = True
    reference_timing: bool = True
    cupti: bool = True
    cupti_markers: Literal["ranges", "streams"] = "streams"
    precision_check: bool = True
    build_timeout_s: Seconds = 600.0
    first_call_timeout_s: Seconds = 300.0
    call_timeout_s: Optional[Seconds] = None
    call_timeout_floor_s: Seconds = 10.0
    call_timeout_factor: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 50.0
    keep_going: bool = False
    seed: Optional[Seed] = None
    log_cap: Annotated[int, Field(ge=0)] = 8192
    spare_workers: Optional[Annotated[int, Field(ge=0, le=64)]] = None
    progress: Optional[Callable[[str, int, int], None]] = None
    on_trace: Optional[Callable[[Any], None]] = None

    def with_timeout(self, seconds: float) -> "EvalConfig":
        """``--timeout``: one limit (s) for every call, the first included (a new config;
        ValidationError naming ``call_timeout_s`` when ``seconds`` is out of bounds)."""
        from dataclasses import replace

        return replace(self, call_timeout_s=seconds, first_call_timeout_s=seconds)

    def later_call_timeout(self, reference_call_s: float) -> float:
        """Limit (s) of the calls after a workload's first one (see ``call_timeout_s``)."""
        if self.call_timeout_s is not None:
            return self.call_timeout_s
        return max(self.call_timeout_floor_s, self.call_timeout_factor * max(reference_call_s, 0.0))

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

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

    def n_spare_workers(self) -> int:
        """Spare workers of a run (``spare_workers``; default 2 on CUDA, 0 on the CPU)."""
        if self.spare_workers is not None:
            return self.spare_workers
        return 2 if self.is_cuda else 0

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


#: the defaults, for help texts that state them
DEFAULTS = EvalConfig()


def _number(v: Any) -> str:
    """A bound as a user wrote it: 0 and 86400, not 0.0 and 86400.0."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return str(int(v))
    return str(v)


def explain(error: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """The first error of ``error`` (a ValidationError of :class:`EvalConfig` or of a model
    using the types above) as one line: ``<name>: must be >= 1, got 0``, the field named by
    ``names[field]`` when given (a CLI option: ``--iters``), else by the field itself."""
    errs = error.errors()
    if not errs:
        return str(error)
    e = errs[0]
    loc = [str(x) for x in e.get("loc", ())]
    field = loc[0] if loc else ""
    name = (names or {}).get(field, ".".join(loc))
    ctx = e.get("ctx") or {}
    got = e.get("input")
    kind = e.get("type", "")
    words = {"greater_than_equal": ">= {ge}", "greater_than": "> {gt}",
             "less_than_equal": "<= {le}", "less_than": "< {lt}"}
    if kind in words:
        what = "must be " + words[kind].format(**{k: _number(v) for k, v in ctx.items()})
    elif kind == "finite_number":
        what = "must be a finite number"
    elif kind == "string_pattern_mismatch" and field == "device":
        what = "must be cpu, cuda or cuda:N"
    elif kind == "literal_error":
        what = f"must be {ctx.get('expected', 'one of the allowed values')}"
    elif kind == "unexpected_keyword_argument":
        return f"{name}: not a setting of {error.title}"
    else:
        what = e.get("msg", "invalid").removeprefix("Value error, ")
    return f"{name}: {what}, got {got!r}" if not isinstance(got, (dict, list)) else f"{name}: {what}"
