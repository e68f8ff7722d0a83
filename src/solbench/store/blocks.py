"""Typed views of the trace blocks that ``spec.trace.Evaluation`` keeps as free dicts
(``sol``, ``telemetry``, ``phases_s``).

The trace keeps them as dicts so that a block written by an older or newer solbench still
loads; readers (the report, the results database, ``compare``) go through these models, so
a block of the wrong shape is a clear error at one place instead of a ``KeyError`` deep in
a figure. Unknown keys are kept (``extra="allow"``); known keys are checked. Units: times
in ms, clocks in MHz, power in W, phases in s.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..spec.trace import Trace


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow")


class SolBound(_Block):
    """The bound's figures (``solbench.sol.bound`` SolBound, as dumped)."""

    sol_ms: float | None = None
    bottleneck: str | None = None
    terms_ms: dict[str, float] = Field(default_factory=dict)
    total_flops: float | None = Field(None, description="FLOP, 2 per MAC")
    bytes_model: float | None = Field(None, description="bytes the bound charges to DRAM")
    arithmetic_intensity: float | None = Field(None, description="FLOP / byte")
    hardware: str | None = None
    hardware_kind: str | None = None


class SolBlock(_Block):
    """``evaluation.sol``: T_SOL, the SOL score S and headroom reclaimed h against a named
    baseline (``solbench.sol.score``), or ``error`` when the bound could not be computed."""

    hardware: str | None = None
    model: str | None = None
    sol_ms: float | None = None
    bound: SolBound | None = None
    baseline: str | None = None
    score: float | None = None
    raw_score: float | None = None
    h: float | None = Field(None, description="headroom reclaimed (T_b - T_k)/(T_b - T_SOL)")
    t_k_ms: float | None = None
    t_b_ms: float | None = None
    t_sol_ms: float | None = None
    finding: dict[str, Any] | None = None
    error: str | None = None
    #: True: the candidate's CPU time is below the timer's resolution (no score, no ratio)
    unresolved: bool | None = None


class TelemetrySample(_Block):
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle_reasons: list[str] = Field(default_factory=list)


class Telemetry(_Block):
    """``evaluation.telemetry``: NVML samples around the timed phase; ``clocks``: the SM and
    memory clocks (MHz, min/median/max) and throttle reasons seen during the timed calls
    (``harness.telemetry.clock_summary``; every figure None with ``reason`` on the CPU)."""

    samples: list[TelemetrySample] = Field(default_factory=list)
    throttled: Any = None
    clocks: dict[str, Any] | None = None


class Phases(_Block):
    """``evaluation.phases_s``: wall seconds per phase (keys as the evaluator names them;
    ``timing.*`` / ``ref_timing.*`` split the timed blocks)."""

    model_config = ConfigDict(extra="allow")

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in (self.model_extra or {}).items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}


class BlockError(ValueError):
    """A trace block of the wrong shape (names the block and the field)."""


def _parse(model, value, name: str):
    if value is None:
        return None
    try:
        return model.model_validate(value)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise BlockError(f"evaluation.{name}{'.' + where if where else ''}: {err['msg']}") from None


def sol_of(trace: Trace) -> SolBlock | None:
    """The trace's SOL block, typed; None when it has none. Raises BlockError."""
    return _parse(SolBlock, trace.evaluation.sol, "sol")


def telemetry_of(trace: Trace) -> Telemetry | None:
    return _parse(Telemetry, trace.evaluation.telemetry, "telemetry")


def phases_of(trace: Trace) -> Phases | None:
    return _parse(Phases, trace.evaluation.phases_s, "phases_s")


def check_blocks(trace: Trace) -> None:
    """Raise BlockError when any typed block of ``trace`` is malformed."""
    sol_of(trace)
    telemetry_of(trace)
    phases_of(trace)
