"""Suite summaries: correct rate, win rate against eager, median and geometric-mean speedup,
fast_p, and mean SOL score, computed from traces.

Definitions (one source of truth for each; tests in tests/suites/test_summary.py work them
out by hand):

* speedup of a PASSED trace = ``performance.speedup_factor`` (the eager reference's time over
  the candidate's, both measured in the same session), or ``reference_latency_ms /
  latency_ms`` when the factor is absent. Non-PASSED traces have no speedup, nor do traces
  with both sides' times below the CPU timer's resolution (``timing.resolved`` false). With
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
  al. 2025, "fast_p"); fast_0 equals the correct rate.
* win rate against eager = fast_1 (correct and strictly faster than the eager reference).
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
        # a time below the CPU timer's resolution gives no ratio, only a bound (module docstring)
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
    if not isinstance(sol, dict):
        return None
    for key in ("score", "sol_score"):
        v = sol.get(key)
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


def fast_p(correct: Sequence[bool], speedups: Sequence[float | None], p: float) -> float | None:
    """Share of units that are correct and have speedup > p (KernelBench's fast_p).

    ``correct`` and ``speedups`` are parallel; the denominator is every unit. None when
    there are no units.
    """
    if len(correct) != len(speedups):
        raise ValueError("correct and speedups must have the same length")
    if not correct:
        return None
    hits = sum(1 for c, s in zip(correct, speedups) if c and s is not None and s > p)
    return hits / len(correct)


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
    mean_sol_score: float | None
    sol_units: int
    sol_above_one: int
    statuses: dict[str, int]

    def to_json(self) -> dict:
        return asdict(self)


def _p_key(p: float) -> str:
    return f"{p:g}"


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
        speedup = None
        if correct:
            sp = [trace_speedup(t) for t in ts]
            speedup = geomean(sp) if all(s is not None for s in sp) else None
        scores = [trace_sol_score(t) for t in ts] if correct else []
        scores = [s for s in scores if s is not None]
        out.append(UnitResult(
            definition=key[0], solution=key[1], label=key[2], workloads=len(ts), passed=passed,
            correct=correct, speedup=speedup,
            sol_score=(sum(scores) / len(scores)) if scores else None,
            statuses=dict(statuses),
        ))
    return out


def summarize_units(units: Sequence[UnitResult], label: str = "all", unit: str = "problem",
                    ps: Sequence[float] = DEFAULT_PS) -> Summary:
    """Headline figures over already-built units."""
    correct = [u.correct for u in units]
    speed = [u.speedup for u in units]
    good = [s for c, s in zip(correct, speed) if c and s is not None]
    scores = [u.sol_score for u in units if u.correct and u.sol_score is not None]
    statuses: Counter = Counter()
    for u in units:
        statuses.update(u.statuses)
    n = len(units)
    return Summary(
        label=label, unit=unit, units=n, correct=sum(correct),
        correct_rate=(sum(correct) / n) if n else None,
        win_rate=fast_p(correct, speed, 1.0),
        median_speedup=statistics.median(good) if good else None,
        geomean_speedup=geomean(good),
        fast_p={_p_key(p): fast_p(correct, speed, p) for p in ps},
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
