"""Rich tables for traces (presentation only: figures come from the traces)."""

from __future__ import annotations

from typing import Iterable

from rich.markup import escape
from rich.table import Table

from ..spec.trace import Status, Trace

STATUS_STYLE = {
    Status.PASSED: "green", Status.INCORRECT_NUMERICAL: "red", Status.INCORRECT_SHAPE: "red",
    Status.INCORRECT_DTYPE: "red", Status.RUNTIME_ERROR: "magenta", Status.COMPILE_ERROR: "magenta",
    Status.TIMEOUT: "magenta", Status.REWARD_HACK: "bold red", Status.INVALID_REFERENCE: "yellow",
}


def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def _axes(t: Trace) -> str:
    ax = t.workload.axes
    s = ",".join(f"{k}={v}" for k, v in ax.items())
    return s if len(s) <= 40 else s[:37] + "..."


def trace_table(traces: Iterable[Trace], title: str | None = None) -> Table:
    """One row per trace: workload, status, latency (ms, median), reference latency, speedup,
    max abs error, relative L2 error, SOL score, and the deciding check or finding."""
    tb = Table(title=title, show_lines=False)
    for col, just in (("solution", "left"), ("workload", "left"), ("axes", "left"),
                      ("status", "left"), ("latency ms", "right"), ("ref ms", "right"),
                      ("speedup", "right"), ("max abs err", "right"), ("rel L2", "right"),
                      ("SOL score", "right"), ("why", "left")):
        tb.add_column(col, justify=just, overflow="fold")
    for t in traces:
        ev = t.evaluation
        perf = ev.performance
        corr = ev.correctness
        why = ""
        hacks = [f for f in ev.findings if f.severity == "hack"]
        if hacks:
            why = f"{hacks[0].check}: {hacks[0].message}"
        elif ev.status != Status.PASSED:
            if corr is not None and corr.extra.get("failed_check"):
                why = str(corr.extra.get("failed_check"))
            else:
                why = (ev.log.strip().splitlines() or [""])[0]
        score = ev.sol.get("score") if isinstance(ev.sol, dict) else None
        tb.add_row(
            t.solution, t.workload.uuid[:8], _axes(t),
            f"[{STATUS_STYLE.get(ev.status, '')}]{ev.status.value}[/]",
            _fmt(perf.latency_ms if perf else None), _fmt(perf.reference_latency_ms if perf else None),
            _fmt(perf.speedup_factor if perf else None, ".3g"),
            _fmt(corr.max_absolute_error if corr else None, ".2e"),
            _fmt(corr.extra.get("rel_l2") if corr else None, ".2e"),
            _fmt(score, ".3f"), escape(why[:120]),
        )
    return tb
