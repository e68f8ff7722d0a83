"""Typed views of the trace blocks that ``spec.trace.Evaluation`` keeps as free dicts
(``telemetry``, ``phases_s``); the SOL block is typed in the trace itself
(:class:`solbench.spec.trace.SolBlock`, re-exported here) and :func:`sol_of` returns it.

The trace keeps them as dicts so that a block written by an older or newer solbench still
loads; readers (the report, the results database, ``compare``) go through these models, so
a block of the wrong shape is a clear error at one place instead of a ``KeyError`` deep in
a figure. Unknown keys are kept (``extra="allow"``); known keys are checked. Units: times
in ms, clocks in MHz, power in W, phases in s.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..spec.trace import SolBlock, SolBoundFigures, Trace

#: the bound's figures under ``evaluation.sol.bound`` (one shape: ``spec.trace``)
SolBound = SolBoundFigures


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow")


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
    """The trace's SOL block (typed when the trace was loaded); None when it has none.
    Raises BlockError for a block that was set to a wrong shape after loading."""
    sol = trace.evaluation.sol
    if sol is None or isinstance(sol, SolBlock):
        return sol
    return _parse(SolBlock, sol, "sol")


def telemetry_of(trace: Trace) -> Telemetry | None:
    return _parse(Telemetry, trace.evaluation.telemetry, "telemetry")


def phases_of(trace: Trace) -> Phases | None:
    return _parse(Phases, trace.evaluation.phases_s, "phases_s")


def check_blocks(trace: Trace) -> None:
    """Raise BlockError when any typed block of ``trace`` is malformed."""
    sol_of(trace)
    telemetry_of(trace)
    phases_of(trace)
