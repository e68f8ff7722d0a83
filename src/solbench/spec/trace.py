"""Trace: the record of one solution x workload evaluation (JSONL). See formats.md.

Upstream fields keep their names (``definition``, ``solution``, ``workload``,
``evaluation.{status, log, correctness, performance, environment, timestamp}``) so upstream
tools read our traces. solbench's additions sit under named keys: ``correctness.extra``
(scale-invariant errors, write coverage, the check that failed), ``evaluation.timing`` and
``evaluation.reference_timing`` (statistics with the statistic named, raw samples kept),
``evaluation.telemetry`` (NVML), ``evaluation.findings`` (guard evidence), ``evaluation.sol``,
``evaluation.executor`` (which worker and GPU evaluated it).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from .workload import Workload


class Status(str, Enum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    #: solbench only: passed every upstream-compatible correctness round, failed the strict
    #: round (docs/inputs.md, "Rounds"); SOL-ExecBench's verdict would be PASSED
    INCORRECT_STRICT = "INCORRECT_STRICT"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"
    INVALID_REFERENCE = "INVALID_REFERENCE"
    #: solbench only: the workload cannot run here and nothing was judged: its reference needs
    #: a device this one is not (``needs-cuda``), or its estimated memory exceeds what this
    #: machine has (docs/harness.md, "Problems that cannot run here"); the finding
    #: ``not_runnable`` carries the reason and the figures
    NOT_RUNNABLE = "NOT_RUNNABLE"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Finding(_Model):
    """A structured piece of evidence from a guard, a check or the static audit.

    ``severity``: "hack" (decides REWARD_HACK), "fail" (decides an INCORRECT_* status),
    "advisory" (shown, decides nothing).
    """

    check: str
    severity: str = "advisory"
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)


class Correctness(_Model):
    max_relative_error: float | None = 0.0
    max_absolute_error: float | None = 0.0
    has_nan: bool = False
    has_inf: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class Performance(_Model):
    latency_ms: float
    reference_latency_ms: float | None = None
    speedup_factor: float | None = None


class Environment(_Model):
    hardware: str
    libs: dict[str, str] = Field(default_factory=dict)
    #: how the candidate's worker was isolated (solbench addition; harness.sandbox.sandbox_status:
    #: mode uid|userns|none, namespaces, seccomp, warning); None in traces written before it
    sandbox: dict[str, Any] | None = None


class TimingStats(_Model):
    """Timing statistics with the statistic named. Units: milliseconds.

    ``method``: "cupti" (all-stream device activity span per call), "cuda_event", or
    "perf_counter" (host clock around call + synchronize, CPU). ``samples_ms`` holds every
    timed iteration, in order, so any statistic can be recomputed.
    """

    method: str
    median_ms: float | None
    iqr_ms: float | None
    min_ms: float | None
    mean_ms: float | None
    n_samples: int
    warmup: int
    cold_l2: bool
    l2_flush_bytes: int = 0
    samples_ms: list[float | None] = Field(default_factory=list)
    kernel_sum_median_ms: float | None = None
    #: CUPTI only: each timed call's sum of kernel durations (ms), in the order of
    #: ``samples_ms`` (the span less this is the host's gaps between the call's launches)
    kernel_sum_samples_ms: list[float] | None = None
    host_median_ms: float | None = None
    notes: list[str] = Field(default_factory=list)
    #: CPU (perf_counter) only: whether the median is above what the held-timing path resolves
    #: (``harness.measure.cpu_resolution``); False: the time is noise of the subtracted no-op
    #: baseline and no speedup, score or SOL verdict is made from it; None: not judged (CUDA,
    #: or a trace written before the rule)
    resolved: bool | None = None
    #: the run's noise floor (ms): a median must be above it to be resolved (no-op median +
    #: RESOLVE_K x IQR, ``harness.measure.cpu_resolution``)
    resolution_ms: float | None = None


def speedup_bound(timing: "TimingStats | None", ref: "TimingStats | None") -> tuple[str, float] | None:
    """The bound on the speedup (reference time / candidate time) that a pair with exactly one
    unresolved CPU side still proves, as ``("<=", v)`` or ``(">=", v)``; None when both sides
    are resolved (the speedup is a measurement), both unresolved, or a figure is missing.

    An unresolved side's median is at most its ``resolution_ms`` (docs/harness.md
    "Resolution of CPU times": resolved means a median above that threshold), so with the
    candidate resolved, speedup = T_ref / T_cand <= resolution_ref / median_cand; with the
    reference resolved, speedup >= median_ref / resolution_cand. E.g. a candidate of 230.2 ms
    against a reference below 40.3 ms: ``("<=", 0.175)``."""
    if timing is None or ref is None:
        return None
    if timing.resolved is True and ref.resolved is False:
        num, den, kind = ref.resolution_ms, timing.median_ms, "<="
    elif timing.resolved is False and ref.resolved is True:
        num, den, kind = ref.median_ms, timing.resolution_ms, ">="
    else:
        return None
    if num is None or den is None or not (math.isfinite(num) and math.isfinite(den)) or num <= 0 or den <= 0:
        return None
    return kind, num / den


def speedup_resolved(ev: "Evaluation") -> bool | None:
    """Whether the evaluation's speedup is resolved (``speedup_resolution.resolved``): True
    only when the paired-block rule held; None for traces without the block (written before
    the rule, or without a reference timing). Reports count a speedup (fast_p, win rate) only
    when this is True, or None for an old trace whose figures they judge as before."""
    r = ev.speedup_resolution
    if not isinstance(r, dict) or not isinstance(r.get("resolved"), bool):
        return None
    return r["resolved"]


class SpeedupBound(_Model):
    """A bound on the speedup (reference time / candidate time, dimensionless) that a CPU pair
    with exactly one side unresolved proves (:func:`speedup_bound`): ``op`` "<=" when the
    candidate is resolved and the reference not, ">=" the other way round."""

    op: Literal["<=", ">="]
    value: float


class _Block(BaseModel):
    """A solbench block of the trace: known keys typed, unknown keys kept (a block written by
    a newer solbench still loads), and only the keys that were set written back, so a block
    round-trips unchanged (no ``null`` for every field it never had)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_serializer(mode="wrap")
    def _set_keys_only(self, handler):
        out = handler(self)
        keep = set(self.model_fields_set) | set(self.model_extra or {})
        return {k: v for k, v in out.items() if k in keep}


class SolBoundFigures(_Block):
    """``evaluation.sol.bound``: the figures of the bound that is T_SOL
    (``solbench.sol.bound.SolBound`` dumped; docs/sol-model.md). Units: ms, FLOP (2 per
    MAC), bytes."""

    sol_ms: float | None = None
    bottleneck: str | None = None
    terms_ms: dict[str, float] = Field(default_factory=dict)
    total_flops: float | None = Field(None, description="FLOP, 2 per MAC")
    bytes_model: float | None = Field(None, description="bytes the bound charges to DRAM")
    arithmetic_intensity: float | None = Field(None, description="FLOP / byte")
    hardware: str | None = None
    hardware_kind: str | None = None


class SolBlock(_Block):
    """``evaluation.sol``: the speed-of-light figures of one PASSED trace (made by
    ``solbench.run.context.sol_block``; docs/sol-model.md).

    ``sol_ms`` is T_SOL (ms) of the bound ``model`` (refined | solar) on ``hardware``;
    ``bounds`` holds both models' (one count), ``bound`` the full figures of T_SOL's,
    ``t_certain_ms`` the certain floor (compulsory output bytes beyond L2 at peak DRAM
    bandwidth). Against the ``baseline`` (the eager reference timed in the same run):
    ``score`` S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)) capped at 1 (``raw_score``
    uncapped), ``h`` = (T_b - T_k) / (T_b - T_SOL), ``t_k_ms`` / ``t_b_ms`` the candidate's /
    baseline's medians, ``measured_over_sol`` = T_k / T_SOL (``solbench.sol.score``).
    ``unresolved``: the candidate's CPU time is not above the run's noise floor
    (``TimingStats.resolution_ms``; no score, no ratio). ``error``: the bound could not be
    counted (nothing else but hardware and model).

    Traces written before this model carried T_SOL twice, as ``sol_ms`` and (from the
    score) ``t_sol_ms``; a block with ``t_sol_ms`` loads with it as ``sol_ms``."""

    hardware: str | None = None
    model: str | None = None
    t_sol_model: str | None = None
    sol_ms: float | None = None
    t_certain_ms: float | None = None
    bounds: dict[str, dict[str, Any]] | None = None
    bound: SolBoundFigures | None = None
    baseline: str | None = None
    measured_over_sol: float | None = None
    measured_over_sol_by_model: dict[str, float] | None = None
    score: float | None = None
    raw_score: float | None = None
    h: float | None = Field(None, description="headroom reclaimed (T_b - T_k)/(T_b - T_SOL)")
    t_k_ms: float | None = None
    t_b_ms: float | None = None
    finding: dict[str, Any] | None = None
    error: str | None = None
    unresolved: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_t_sol(cls, data: Any) -> Any:
        if isinstance(data, dict) and "t_sol_ms" in data:
            data = dict(data)
            t_sol = data.pop("t_sol_ms")
            if data.get("sol_ms") is None:
                data["sol_ms"] = t_sol
        return data


class ExecutorStamp(_Block):
    """``evaluation.executor``: who evaluated the trace (``solbench.run.executors``).

    ``name`` local | ray; ``worker`` the executor's worker (``local``, ``w0``, ``driver``);
    ``node`` host name; ``pid`` the evaluating process; ``gpu_uuid`` the NVML UUID of its one
    GPU (None on the CPU); ``attempt`` 1-based, ``retried`` True when an earlier attempt's
    worker died mid-pair (``lost`` names those workers); ``seq`` the trace's 1-based
    position among the traces its run wrote."""

    name: str
    worker: str | None = None
    node: str | None = None
    pid: int | None = None
    gpu_uuid: str | None = None
    cuda_visible_devices: str | None = None
    attempt: int = 1
    retried: bool = False
    seq: int | None = None
    lost: list[dict[str, Any]] | None = None


class Evaluation(_Model):
    status: Status
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None
    environment: Environment
    timestamp: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    # solbench additions
    timing: TimingStats | None = None
    reference_timing: TimingStats | None = None
    #: CPU only, exactly one side unresolved (``performance.speedup_factor`` is then None): the
    #: bound on the speedup the resolved side proves (solbench addition; docs/harness.md)
    speedup_bound: SpeedupBound | None = None
    #: whether the pair's speedup (a ratio outside the noise, or ``speedup_bound``) is
    #: resolved by the paired-block rule (``harness.resolution.pair_resolution``,
    #: docs/harness.md "Resolved speedups"): ``resolved``, ``reason``, ``block_ratios``,
    #: ``interval``, ``direction``, the block medians, the load and no-op drift evidence.
    #: Unresolved: no bound is claimed and reports count the speedup as noise. None: no
    #: reference timing, or a trace written before the rule (solbench addition)
    speedup_resolution: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    findings: list[Finding] = Field(default_factory=list)
    sol: SolBlock | None = None
    solution_hash: str | None = None
    #: the candidate's label in a suite run (``solbench run``: the name of its file in the
    #: solutions folder, ``eager``, ``compile``, ...): the name report and compare show; None
    #: for a single evaluation (``solbench.report.records.label_for`` then names it)
    label: str | None = None
    #: the suite of the evaluated problem (``spec.Problem.suite``: its ``suite:`` tag, else the
    #: folder holding it, e.g. SOL-ExecBench's ``L1``): the group report and compare show it
    #: under; None in traces written before it (the report then falls back on the results
    #: file's folder, ``solbench.report.records.suite_of``)
    suite: str | None = None
    device: str | None = None
    #: wall seconds of the evaluation's phases for this workload (worker_start: spawn + build
    #: of the worker that served it, charged to the first workload it served; inputs;
    #: correctness; timing, with reference_timing the part spent timing the eager reference;
    #: sol: the SOL bound and score; timing.* / ref_timing.* split the timed blocks of the
    #: candidate / the reference into profiler start+stop, inputs, calls, guards, verify, and
    #: ref_timing.worker the reference worker's (re)start check)
    phases_s: dict[str, float] | None = None
    #: C++ family: where the worker's compiled module came from: "shared" (the harness's
    #: shared build cache, built ahead of time in its own sandboxed worker), "private" (the
    #: worker's own cache), "built" (compiled in the worker); None for Python languages
    build_cache: str | None = None
    #: fingerprint of the base seed of this evaluation's inputs when one was given
    #: (``--seed``; ``solbench.inputs.seeds.fingerprint``): every input set's seed derives
    #: from the base, so ``--seed BASE`` reproduces the run, but the base itself is never
    #: written (a candidate reading the results file would derive later inputs from it).
    #: None when each input set's seed was drawn from the OS's random source (the default).
    input_seed: str | None = None
    #: the seed of every input set of this workload, in the order they were made (hex;
    #: correctness rounds first, then the timed sets); recorded after the evaluation, so
    #: ``solbench.inputs.make_inputs(problem, workload, int(s, 16), device)`` rebuilds any one
    input_seeds: list[str] | None = None
    #: who evaluated it (:class:`ExecutorStamp`)
    executor: ExecutorStamp | None = None

    @model_validator(mode="after")
    def _representable(self):
        if self.status == Status.PASSED and self.correctness is None:
            raise ValueError("a PASSED evaluation must carry correctness figures")
        if self.status in (Status.INCORRECT_NUMERICAL, Status.INCORRECT_STRICT) and self.correctness is None:
            raise ValueError(f"an {self.status.value} evaluation must carry its error figures")
        if self.status == Status.REWARD_HACK and not any(
            f.severity == "hack" for f in self.findings
        ):
            raise ValueError("a REWARD_HACK evaluation must carry the finding that decided it")
        if self.performance is not None and self.status != Status.PASSED:
            raise ValueError("only a PASSED evaluation carries performance")
        return self


#: keys the results store adds around a trace on each stored line (``solbench.store``):
#: schema version, run id and sequence number within the run, HMAC block. Not trace fields.
ENVELOPE_KEYS = ("schema_version", "run_id", "seq", "auth")


class Trace(_Model):
    definition: str
    solution: str
    workload: Workload
    evaluation: Evaluation

    def to_json_line(self) -> str:
        """One strict-JSON line (NaN/Inf become null; raises ValueError if any remain)."""
        return json.dumps(_finite(self.model_dump(mode="json")), allow_nan=False)

    @classmethod
    def from_json_line(cls, line: str) -> "Trace":
        """Parse one stored line; the store's envelope keys (``ENVELOPE_KEYS``) are dropped
        unchecked (``solbench.store.read_store`` verifies them). Raises ValueError."""
        obj = json.loads(line)
        if isinstance(obj, dict):
            obj = {k: v for k, v in obj.items() if k not in ENVELOPE_KEYS}
        return cls.model_validate(obj)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj
