"""Rich tables for traces (presentation only: figures come from the traces).

Nothing a reader needs is cut: workload uuids and axes are shown whole (cells fold), the
reason of a failure is the line of the log that says what went wrong (a compiler's
``error:`` line for a failed C++ build), and a speedup inside the run's own timing noise is
marked ``~`` (see :func:`speedup_interval` and :data:`NOISE_LEGEND`).
"""

from __future__ import annotations

import math
from typing import Iterable

from .markup import TextTable as Table
from .markup import styled

from ..spec.trace import Status, TimingStats, Trace, speedup_resolved

STATUS_STYLE = {
    Status.PASSED: "green", Status.INCORRECT_NUMERICAL: "red", Status.INCORRECT_STRICT: "red",
    Status.INCORRECT_SHAPE: "red", Status.INCORRECT_DTYPE: "red", Status.RUNTIME_ERROR: "magenta",
    Status.COMPILE_ERROR: "magenta",
    Status.TIMEOUT: "magenta", Status.REWARD_HACK: "bold red", Status.INVALID_REFERENCE: "yellow",
    Status.NOT_RUNNABLE: "yellow",
}

#: printed under every table that holds a noise-marked speedup
NOISE_LEGEND = ("~ : speedup within this run's timing noise (the candidate's and the reference's "
                "interquartile ranges of latency overlap, or the paired-block rule refused the claim: "
                "docs/harness.md); ! : timing_unstable (IQR/median above "
                "the harness's limit)")

#: the log prefix with which the harness records a safetensors blob missing on disk
_MISSING_INPUT = "inputs unavailable:"


def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def _axes(t: Trace) -> str:
    return ",".join(f"{k}={v}" for k, v in t.workload.axes.items())


def _quartiles(ts: TimingStats | None) -> tuple[float, float] | None:
    """(Q1, Q3) of a timing in ms: from its raw samples when it has them (linear
    interpolation, as numpy's default), else median -/+ IQR/2."""
    if ts is None:
        return None
    xs = sorted(x for x in ts.samples_ms if x is not None and math.isfinite(x))
    if len(xs) >= 2:
        def q(p: float) -> float:
            pos = p * (len(xs) - 1)
            lo = int(math.floor(pos))
            hi = min(lo + 1, len(xs) - 1)
            return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

        return q(0.25), q(0.75)
    if ts.median_ms is None or ts.iqr_ms is None:
        return None
    return ts.median_ms - ts.iqr_ms / 2, ts.median_ms + ts.iqr_ms / 2


def speedup_interval(trace: Trace) -> tuple[float, float] | None:
    """The speedup's spread implied by the run's own noise: (ref Q1 / cand Q3, ref Q3 /
    cand Q1). None without both timings. The interval holds 1.0 exactly when the two
    latency interquartile ranges overlap: the run cannot tell the candidate from the
    reference."""
    ev = trace.evaluation
    c, r = _quartiles(ev.timing), _quartiles(ev.reference_timing)
    if c is None or r is None or c[0] <= 0 or c[1] <= 0:
        return None
    return r[0] / c[1], r[1] / c[0]


def within_noise(trace: Trace) -> bool:
    """The speedup is noise: its interval (:func:`speedup_interval`) holds 1, or the paired-block
    rule refused it (``spec.trace.speedup_resolved`` False; docs/harness.md, Resolved speedups)."""
    if speedup_resolved(trace.evaluation) is False:
        return True
    iv = speedup_interval(trace)
    return iv is not None and iv[0] <= 1.0 <= iv[1]


def timing_unstable(trace: Trace) -> bool:
    return any(f.check == "timing_unstable" for f in trace.evaluation.findings)


UNRESOLVED_LEGEND = ("unres. <=X ms: that side's CPU time is not above this run's noise floor X, the "
                     "no-op windows' median + 3 x their IQR (docs/harness.md, Resolution of CPU times); <=v / >=v (cand./ref. unres.): the "
                     "bound on the speedup that the resolved side proves")


def unresolved_text(ts: TimingStats | None, short: bool = False) -> str | None:
    """``unresolved (not above this run's noise floor: 1.2 ms)`` (``short``: ``unres. <=1.2 ms``,
    for table cells; the legend is :data:`UNRESOLVED_LEGEND`) for a side whose CPU time is not
    resolved (``TimingStats.resolved`` False), else None."""
    if ts is None or ts.resolved is not False:
        return None
    if short:
        return f"unres. <={ts.resolution_ms:.3g} ms" if ts.resolution_ms is not None else "unres."
    res = f"{ts.resolution_ms:.3g} ms" if ts.resolution_ms is not None else "unknown"
    return f"unresolved (not above this run's noise floor: {res})"


def unresolved_side(trace: Trace) -> str | None:
    """Which side's CPU time is unresolved: "candidate", "reference", "both", or None."""
    ev = trace.evaluation
    c = ev.timing is not None and ev.timing.resolved is False
    r = ev.reference_timing is not None and ev.reference_timing.resolved is False
    return "both" if c and r else "candidate" if c else "reference" if r else None


def bound_text(trace: Trace) -> str | None:
    """``<=0.175x`` / ``>=3.2x``: the speedup bound of a PASSED pair with one side unresolved
    (``report.summary.trace_speedup_bound``), else None."""
    from .summary import trace_speedup_bound

    b = trace_speedup_bound(trace)
    return f"{b[0]}{b[1]:.3g}x" if b is not None else None


def speedup_text(trace: Trace, short: bool = False) -> str:
    """``1.93x``, ``1.03x ~`` (within noise), ``0.8x !`` (timing_unstable), or ``-``; with a
    side's CPU time unresolved, the side named and the bound the other side proves:
    ``<=0.175x (reference unresolved: not above this run's noise floor, 40.3 ms)`` (``short``:
    ``<=0.175x (ref. unres.)``), ``unresolved (both sides not above this run's noise floor:
    2.4 ms)`` (``short``: ``unres. (both)``). The noise floor is ``TimingStats.resolution_ms``
    (ms): the no-op windows' median + 3 x their IQR (``harness.measure.cpu_resolution``)."""
    ev = trace.evaluation
    side = unresolved_side(trace) if ev.status == Status.PASSED else None
    if side is not None:
        ts = {"candidate": ev.timing, "reference": ev.reference_timing}.get(side)
        bound = bound_text(trace)
        if side == "both":
            if short:
                return "unres. (both)"
            rc, rr = ev.timing.resolution_ms, ev.reference_timing.resolution_ms
            res = (f"{rc:.3g} ms" if rc == rr else f"candidate {rc:.3g} ms, reference {rr:.3g} ms") \
                if rc is not None and rr is not None else "unknown"
            return f"unresolved (both sides not above this run's noise floor: {res})"
        if short:
            tag = "cand. unres." if side == "candidate" else "ref. unres."
            return f"{bound} ({tag})" if bound else f"unres. ({side[:3]}.)"
        res = f"{ts.resolution_ms:.3g} ms" if ts.resolution_ms is not None else "unknown"
        return (f"{bound} ({side} unresolved: not above this run's noise floor, {res})" if bound
                else f"unresolved ({side} not above this run's noise floor: {res})")
    perf = ev.performance
    if perf is None or perf.speedup_factor is None:
        return "-"
    marks = ("~" if within_noise(trace) else "") + ("!" if timing_unstable(trace) else "")
    return f"{perf.speedup_factor:.3g}x" + (f" {marks}" if marks else "")


def geomean_interval_text(traces: list[Trace], value: float | None) -> str:
    """A geomean speedup over ``traces`` marked ``~`` when the geomeans of their noise
    intervals (see :func:`speedup_interval`) still hold 1.0 or the paired-block rule refused
    any of their claims."""
    if value is None:
        return "-"
    ivs = [speedup_interval(t) for t in traces if t.evaluation.performance is not None]
    mark = ""
    if ivs and all(iv is not None for iv in ivs):
        lo = math.exp(sum(math.log(iv[0]) for iv in ivs) / len(ivs))  # type: ignore[index]
        hi = math.exp(sum(math.log(iv[1]) for iv in ivs) / len(ivs))  # type: ignore[index]
        mark = "~" if lo <= 1.0 <= hi else ""
    if any(speedup_resolved(t.evaluation) is False for t in traces if t.evaluation.performance is not None):
        mark = "~"  # a refused claim is noise (within_noise)
    if any(timing_unstable(t) for t in traces if t.evaluation.performance is not None):
        mark += "!"
    return f"{value:.3g}x" + (f" {mark}" if mark else "")


def missing_input(trace: Trace) -> bool:
    """The workload could not run because its safetensors data is not on disk (the harness
    records it as INVALID_REFERENCE: nothing is known about the candidate or the reference)."""
    return (trace.evaluation.status == Status.INVALID_REFERENCE
            and trace.evaluation.log.lstrip().startswith(_MISSING_INPUT))


def unwritten_output(trace: Trace) -> bool:
    """Part of the candidate's output was never written (``write_coverage`` below 1): its
    error figures are taken over what was written, or over nothing, and say nothing; tables
    show ``-`` for them."""
    corr = trace.evaluation.correctness
    if corr is None:
        return False
    cov = corr.extra.get("write_coverage")
    return isinstance(cov, (int, float)) and not isinstance(cov, bool) and cov < 1.0


def error_figures(trace: Trace) -> tuple[float | None, float | None]:
    """(max abs error, relative L2 error) of a trace's correctness, None for each when the
    trace has none or its output was not all written (:func:`unwritten_output`)."""
    corr = trace.evaluation.correctness
    if corr is None or unwritten_output(trace):
        return None, None
    rel = corr.extra.get("rel_l2")
    return corr.max_absolute_error, rel if isinstance(rel, (int, float)) else None


def _failed_check(trace: Trace) -> str | None:
    """``write_coverage: y: only 0.0000% of the output was written``: the failed correctness
    check with the first failing output's detail, else None."""
    corr = trace.evaluation.correctness
    if corr is None or not corr.extra.get("failed_check"):
        return None
    check = str(corr.extra["failed_check"])
    outs = corr.extra.get("outputs")
    if isinstance(outs, dict):
        for name, o in outs.items():
            if isinstance(o, dict) and o.get("failed_check") and o.get("detail"):
                return f"{check}: {name}: {o['detail']}"
    return check


def failure_reason(trace: Trace) -> str:
    """The line that says why a trace did not pass: a hack finding; else the failed check with
    its detail, the compiler's first ``error`` line of a failed build, or the log's deciding
    line; followed by the first other finding that explains it (``finding audit.global_cache:
    ...``, static findings are advisory on their own)."""
    ev = trace.evaluation
    hacks = [f for f in ev.findings if f.severity == "hack"]
    if hacks:
        return f"{hacks[0].check}: {hacks[0].message}"
    reason = _failed_check(trace) or _log_reason(trace)
    extra = [f for f in ev.findings if f.check != "timing_unstable"]
    if extra:
        f = extra[0]
        reason = (reason + "; " if reason else "") + f"finding {f.check}: {f.message}"
    return reason


def _log_reason(trace: Trace) -> str:
    ev = trace.evaluation
    lines = [x.strip() for x in ev.log.splitlines() if x.strip()]
    if not lines:
        return ""
    if missing_input(trace):
        return "missing input data: " + lines[0][len(_MISSING_INPUT):].strip()
    if ev.status == Status.COMPILE_ERROR:
        errs = [x for x in lines if "error" in x.lower() and not x.lower().startswith(("ninja", "make"))]
        # a compiler's "file:line: error: ..." is the reason; the build step's summary is not
        compiler = [x for x in errs if ": error" in x or "error:" in x]
        pick = (compiler or errs or lines)[0]
        return pick if pick == lines[0] or len(lines) == 1 else f"{lines[0]} | {pick}"
    if ev.status in (Status.RUNTIME_ERROR, Status.TIMEOUT):
        # the worker's output comes first, the verdict's reason last (see the evaluator)
        return lines[-1] if len(lines) > 1 else lines[0]
    return lines[0]


def _sol_cell(trace: Trace) -> str:
    ev = trace.evaluation
    sol = ev.sol
    if sol is not None:
        if sol.error:
            return "SOL error"
        return _fmt(sol.score, ".3f")
    if ev.status != Status.PASSED:
        return "-"
    dev = ev.device or ""
    if dev == "cpu" or dev.startswith("cpu"):
        return "no SOL on CPU"
    return "no hardware spec"


def no_sol_score_reason(trace: Trace) -> str | None:
    """Why a PASSED trace has no SOL score, in a few words: ``no SOL on CPU`` / ``no hardware
    spec`` (no SOL block), ``SOL error`` (the bound could not be counted), a side's CPU time
    unresolved (not above the run's noise floor: no time to score), else ``no score in the SOL
    block``; None for a trace that did not pass or has a score."""
    ev = trace.evaluation
    if ev.status != Status.PASSED:
        return None
    sol = ev.sol
    score = getattr(sol, "score", None)
    if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
        return None
    if sol is None:
        return _sol_cell(trace)  # no SOL on CPU / no hardware spec
    if getattr(sol, "error", None):
        return "SOL error"
    side = unresolved_side(trace)
    if side is not None:
        return {"candidate": "candidate's CPU time unresolved", "reference": "reference's CPU time unresolved",
                "both": "both sides' CPU times unresolved"}[side]
    return "no score in the SOL block"


def trace_table(traces: Iterable[Trace], title: str | None = None) -> Table:
    """One row per trace: workload (full uuid), axes, status, latency (ms, median), reference
    latency, speedup (noise-marked), max abs error, relative L2 error, SOL score (or why
    none), and the deciding check, failure reason or timing note."""
    traces = list(traces)
    tb = Table(title=title, show_lines=False)
    for col, just in (("solution", "left"), ("workload", "left"), ("axes", "left"),
                      ("status", "left"), ("latency ms", "right"), ("ref ms", "right"),
                      ("speedup", "right"), ("max abs err", "right"), ("rel L2", "right"),
                      ("SOL score", "right"), ("why", "left")):
        tb.add_column(col, justify=just, overflow="fold")
    marked = unres = False
    for t in traces:
        ev = t.evaluation
        perf = ev.performance
        if ev.status != Status.PASSED:
            why = failure_reason(t)
        else:
            # advisory findings by name (their messages are in the trace); once each, marked as
            # such: on a PASSED row a bare check name read to a new user as an accusation
            adv = ", ".join(dict.fromkeys(f.check for f in ev.findings if f.severity == "advisory"))
            why = f"advisory: {adv}" if adv else ""
        sp = speedup_text(t, short=True)
        err_abs, err_l2 = error_figures(t)
        marked = marked or sp.endswith(("~", "!"))
        unres = unres or (ev.status == Status.PASSED and unresolved_side(t) is not None)
        status = (styled("missing input data", "yellow") if missing_input(t)
                  else styled(ev.status.value, STATUS_STYLE.get(ev.status, "")))
        tb.add_row(
            t.solution, t.workload.uuid, _axes(t), status,
            (unresolved_text(ev.timing, short=True) if perf else None) or _fmt(perf.latency_ms if perf else None),
            (unresolved_text(ev.reference_timing, short=True) if perf else None)
            or _fmt(perf.reference_latency_ms if perf else None),
            sp,
            _fmt(err_abs, ".2e"), _fmt(err_l2, ".2e"),
            _sol_cell(t), why,
        )
    legends = ([NOISE_LEGEND] if marked else []) + ([UNRESOLVED_LEGEND] if unres else [])
    if legends:
        tb.caption = "\n".join(legends)
    return tb
