"""Suite summaries: correct rate, win rate against eager, median and geometric-mean speedup,
fast_p, and mean SOL score, computed from traces.

Definitions (one source of truth for each; tests in tests/suites/test_summary.py work them
out by hand):

* speedup of a PASSED trace = ``performance.speedup_factor`` (the eager reference's time over
  the candidate's, both measured in the same session), or ``reference_latency_ms /
  latency_ms`` when the factor is absent. Non-PASSED traces have no speedup, nor do traces
  with both sides' times not above the run's noise floor (``timing.resolved`` false). With
  one side unresolved, the trace counts at the bound the resolved side proves
  (:func:`trace_speedup_bound`) when that bound is informative: an upper bound below 1 (a
  proven slowdown, counted no slower than proven) or a lower bound above 1 (a proven speedup,
  counted no faster than proven); other bounds (``<= 3x``, ``>= 0.5x``) say nothing about
  faster or slower and the trace has no speedup.
* unit ``"problem"`` (default, KernelBench-style: every problem weighs the same): one unit per
  (problem, candidate); it is correct when every one of its workloads PASSED, and its speedup
  is the geometric mean of its workloads' speedups. Unit ``"workload"``: one unit per trace.
* correct rate = correct units / all units.
* fast_p = share of ALL units that are correct AND have speedup > p (KernelBench, Ouyang et
  al. 2025, "fast_p"). fast_0 IS the correct rate (every correct unit: a speedup is > 0 even
  when the run could not resolve it). For p > 0 a speedup counts only when the run's own
  noise cannot take it back to p: the low end of its noise interval (:func:`speedup_low`,
  ref Q1 / cand Q3, as ``report.tables.speedup_interval``) is above p as well. A unit whose
  point speedup is above p but whose noise interval reaches p is *left out* and counted in
  ``fast_p_left_out`` (a ``1.03x ~`` is no win). A speedup the paired-block rule refused
  (``evaluation.speedup_resolution.resolved`` false) is noise too: its low end is at most 1.
* win rate against eager = fast_1 (correct and faster than the eager reference beyond the
  run's noise).
* median / geometric-mean speedup: over correct units only (None when there are none).
* mean SOL score: over correct units whose traces carry a SOL score (``evaluation.sol``
  key ``score``, or ``sol_score``); a unit's score is the mean over its workloads. Scores
  above 1 (faster than the bound, a finding per formats.md) are capped at 1 here and
  counted in ``sol_above_one``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Sequence

from ..spec.trace import Status, Trace, speedup_bound, speedup_resolved

DEFAULT_PS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)


def trace_speedup(trace: Trace) -> float | None:
    """Speedup over the eager reference of a PASSED trace (dimensionless), else None."""
    ev = trace.evaluation
    if ev.status != Status.PASSED or ev.performance is None:
        return None
    if any(ts is not None and ts.resolved is False for ts in (ev.timing, ev.reference_timing)):
        # a time not above the run's noise floor gives no ratio, only a bound (module docstring)
        return counted_bound(trace_speedup_bound(trace))
    perf = ev.performance
    s = perf.speedup_factor
    if s is None and perf.reference_latency_ms is not None and perf.latency_ms > 0:
        s = perf.reference_latency_ms / perf.latency_ms
    if s is None or not math.isfinite(s) or s <= 0:
        return None
    return float(s)


def counted_bound(b: tuple[str, float] | None) -> float | None:
    """The value at which a speedup bound counts in summaries: an upper bound below 1 or a
    lower bound above 1 (module docstring); None for any other (it proves neither faster nor
    slower)."""
    if b is None or not ((b[0] == "<=" and b[1] < 1.0) or (b[0] == ">=" and b[1] > 1.0)):
        return None
    return b[1]


def trace_speedup_bound(trace: Trace) -> tuple[str, float] | None:
    """``("<=", v)`` or ``(">=", v)``: the bound on a PASSED trace's speedup when exactly one
    side's CPU time is unresolved (``evaluation.speedup_bound``, or
    worked out from the timings for traces written before those fields:
    :func:`solbench.spec.trace.speedup_bound`); None otherwise."""
    ev = trace.evaluation
    if ev.status != Status.PASSED or ev.performance is None:
        return None
    b = ev.speedup_bound
    if b is not None and math.isfinite(b.value) and b.value > 0:
        return b.op, float(b.value)
    if speedup_resolved(ev) is False:
        return None  # the paired blocks refused the bound (evaluation.speedup_resolution)
    return speedup_bound(ev.timing, ev.reference_timing)


def trace_sol_score(trace: Trace) -> float | None:
    """The SOL score recorded in a trace's SOL block (``score`` or ``sol_score``), or None."""
    sol = trace.evaluation.sol
    if sol is None:
        return None
    for key in ("score", "sol_score"):  # sol_score: an older block's name for it
        v = sol.score if key == "score" else (sol.model_extra or {}).get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean exp(mean(log v)) of positive values; None for an empty input.

    Raises ValueError for a non-positive value.
    """
    vals = list(values)
    if not vals:
        return None
    if any(v <= 0 for v in vals):
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _fast_hits(correct, speedups, p, lows) -> tuple[int, int]:
    """(units counted in fast_p, units left out because their noise interval reaches p)."""
    if len(correct) != len(speedups) or (lows is not None and len(lows) != len(correct)):
        raise ValueError("correct, speedups and lows must have the same length")
    if p <= 0:  # fast_0: the correct share (a speedup is positive, resolved or not)
        return sum(1 for c in correct if c), 0
    hits = out = 0
    for i, (c, s) in enumerate(zip(correct, speedups)):
        if not (c and s is not None and s > p):
            continue
        low = lows[i] if lows is not None else None
        if low is not None and not low > p:
            out += 1
        else:
            hits += 1
    return hits, out


def fast_p(correct: Sequence[bool], speedups: Sequence[float | None], p: float,
           lows: Sequence[float | None] | None = None) -> float | None:
    """Share of units that are correct and have speedup > p (KernelBench's fast_p).

    ``correct``, ``speedups`` and ``lows`` (the low end of each unit's noise interval,
    :func:`speedup_low`; None where unknown) are parallel; the denominator is every unit.
    fast_0 is the correct share; for p > 0 a unit whose ``low`` is not above p is not
    counted (module docstring). None when there are no units.
    """
    if not correct:
        _fast_hits(correct, speedups, p, lows)
        return None
    return _fast_hits(correct, speedups, p, lows)[0] / len(correct)


def fast_p_left_out(correct: Sequence[bool], speedups: Sequence[float | None], p: float,
                    lows: Sequence[float | None] | None = None) -> int:
    """How many correct units have a point speedup above p that :func:`fast_p` leaves out
    because their noise interval reaches p."""
    return _fast_hits(correct, speedups, p, lows)[1]


def speedup_low(trace: Trace) -> float | None:
    """The low end of a PASSED trace's speedup as the run's own noise allows it: ref Q1 /
    cand Q3 (``report.tables.speedup_interval``), never above the speedup itself; with one
    side unresolved, the counted bound (:func:`counted_bound`, already conservative); None
    without a speedup or without the quartiles to tell (the point speedup then counts). A
    speedup the paired-block rule refused (``spec.trace.speedup_resolved`` False) is noise
    (docs/harness.md, Resolved speedups): its low end is at most 1, so no fast_p with p >= 1
    counts it, whatever its quartiles say."""
    s = trace_speedup(trace)
    if s is None:
        return None
    ev = trace.evaluation
    cap = 1.0 if speedup_resolved(ev) is False else math.inf
    if any(ts is not None and ts.resolved is False for ts in (ev.timing, ev.reference_timing)):
        return min(s, cap)
    from .tables import speedup_interval

    iv = speedup_interval(trace)
    if iv is None:
        return None if cap == math.inf else min(s, cap)
    return min(iv[0], s, cap)


def unit_low(lows: Sequence[float | None]) -> float | None:
    """A unit's noise low end: the geometric mean of its workloads' (None when any is
    unknown or none is given), matching the unit speedup's geometric mean."""
    if not lows or any(x is None or x <= 0 for x in lows):
        return None
    return geomean(lows)  # type: ignore[arg-type]


@dataclass
class UnitResult:
    """One summary unit: a (problem, candidate) pair, or one trace when unit="workload"."""

    definition: str
    solution: str
    label: str
    workloads: int
    passed: int
    correct: bool
    speedup: float | None
    sol_score: float | None
    statuses: dict[str, int] = field(default_factory=dict)
    #: low end of the speedup's noise interval (:func:`unit_low`), None when unknown
    speedup_low: float | None = None
    #: the reason of the first failed workload (``report.tables.failure_reason``), "" if none
    reason: str = ""
    #: why a correct unit has no SOL score (:func:`unscored_line`), "" when it has one or
    #: is not correct
    no_sol_score: str = ""


@dataclass
class Summary:
    """Headline figures over a set of units (see the module docstring for each)."""

    label: str
    unit: str
    units: int
    correct: int
    correct_rate: float | None
    win_rate: float | None
    median_speedup: float | None
    geomean_speedup: float | None
    fast_p: dict[str, float | None]
    #: p -> correct units with a point speedup above p left out of fast_p as within noise
    fast_p_left_out: dict[str, int]
    mean_sol_score: float | None
    sol_units: int
    sol_above_one: int
    statuses: dict[str, int]

    def to_json(self) -> dict:
        return asdict(self)


def _p_key(p: float) -> str:
    return f"{p:g}"


def reasons_text(counts: dict[str, int], unit: str = "") -> str:
    """``a`` for one reason; ``a: 2, b: 1`` (``unit`` after each count, most frequent first)
    for several."""
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{k}: {v}{unit}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def unscored_line(reasons: dict[str, int], workloads: int) -> str:
    """``no SOL score for 1 of 3 workloads: candidate's CPU time unresolved`` (several
    reasons: :func:`reasons_text`); "" for no reasons."""
    if not reasons:
        return ""
    return f"no SOL score for {sum(reasons.values())} of {workloads} workloads: {reasons_text(reasons)}"


def unit_results(traces: Iterable[Trace], unit: str = "problem",
                 label_of: Callable[[Trace], str] | None = None) -> list[UnitResult]:
    """Group traces into summary units (module docstring). ``label_of`` names the candidate
    family of a trace (default: the solution name)."""
    if unit not in ("problem", "workload"):
        raise ValueError(f"unit must be 'problem' or 'workload', not {unit!r}")
    label_of = label_of or (lambda t: t.solution)
    groups: dict[tuple, list[Trace]] = defaultdict(list)
    for i, t in enumerate(traces):
        key = (t.definition, t.solution, label_of(t))
        if unit == "workload":
            key = key + (i,)
        groups[key].append(t)
    out = []
    for key, ts in groups.items():
        statuses = Counter(t.evaluation.status.value for t in ts)
        passed = statuses.get(Status.PASSED.value, 0)
        correct = passed == len(ts) and len(ts) > 0
        speedup = low = None
        if correct:
            sp = [trace_speedup(t) for t in ts]
            speedup = geomean(sp) if all(s is not None for s in sp) else None
            low = unit_low([speedup_low(t) for t in ts]) if speedup is not None else None
        failed = [t for t in ts if t.evaluation.status != Status.PASSED]
        if failed:
            from .tables import failure_reason

            reason = f"{failed[0].evaluation.status.value}: {failure_reason(failed[0])}"
        else:
            reason = ""
        # a correct unit's SOL score is the mean over all its workloads, or none when any of
        # them has none (the report's rule, report.aggregate: a mean over the scored subset
        # would rank a problem by the workloads that happened to be scored); why is said
        scores = [trace_sol_score(t) for t in ts] if correct else []
        sol_score = sum(scores) / len(scores) if scores and all(s is not None for s in scores) else None
        unscored = ""
        if correct and sol_score is None:
            from .tables import no_sol_score_reason

            unscored = unscored_line(Counter(no_sol_score_reason(t) or "no score in the SOL block"
                                           for t, sc in zip(ts, scores) if sc is None), len(ts))
        out.append(UnitResult(
            definition=key[0], solution=key[1], label=key[2], workloads=len(ts), passed=passed,
            correct=correct, speedup=speedup, sol_score=sol_score,
            statuses=dict(statuses), speedup_low=low, reason=reason, no_sol_score=unscored,
        ))
    return out


def summarize_units(units: Sequence[UnitResult], label: str = "all", unit: str = "problem",
                    ps: Sequence[float] = DEFAULT_PS) -> Summary:
    """Headline figures over already-built units."""
    correct = [u.correct for u in units]
    speed = [u.speedup for u in units]
    lows = [u.speedup_low for u in units]
    good = [s for c, s in zip(correct, speed) if c and s is not None]
    scores = [u.sol_score for u in units if u.correct and u.sol_score is not None]
    statuses: Counter = Counter()
    for u in units:
        statuses.update(u.statuses)
    n = len(units)
    return Summary(
        label=label, unit=unit, units=n, correct=sum(correct),
        correct_rate=(sum(correct) / n) if n else None,
        win_rate=fast_p(correct, speed, 1.0, lows),
        median_speedup=statistics.median(good) if good else None,
        geomean_speedup=geomean(good),
        fast_p={_p_key(p): fast_p(correct, speed, p, lows) for p in ps},
        fast_p_left_out={_p_key(p): fast_p_left_out(correct, speed, p, lows) for p in ps},
        mean_sol_score=(sum(min(s, 1.0) for s in scores) / len(scores)) if scores else None,
        sol_units=len(scores),
        sol_above_one=sum(1 for s in scores if s > 1.0),
        statuses=dict(statuses),
    )


def summarize(traces: Iterable[Trace], unit: str = "problem",
              label_of: Callable[[Trace], str] | None = None,
              ps: Sequence[float] = DEFAULT_PS) -> dict[str, Summary]:
    """Summaries per candidate label (``label_of``, default the solution name), plus "all"
    when there is more than one label. Returns label -> Summary, labels sorted."""
    units = unit_results(traces, unit=unit, label_of=label_of)
    by_label: dict[str, list[UnitResult]] = defaultdict(list)
    for u in units:
        by_label[u.label].append(u)
    out = {lab: summarize_units(us, label=lab, unit=unit, ps=ps)
           for lab, us in sorted(by_label.items())}
    if len(by_label) > 1:
        out["all"] = summarize_units(units, label="all", unit=unit, ps=ps)
    return out
