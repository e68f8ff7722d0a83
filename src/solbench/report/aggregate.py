"""Leaderboards and the figures' statistics, from :mod:`.records` rows.

Unit: one (problem, candidate label) within a (suite, hardware) group, as in KernelBench and
``report.summary``. A unit is *correct* when every one of its workloads PASSED, a *hack*
when any workload is REWARD_HACK, otherwise *incorrect* (some workload failed a check, did
not build, crashed or timed out). Per unit:

* ``sol_score``: mean of its workloads' SOL scores when correct; 0 when not correct (a wrong
  or hacked kernel closes none of the gap); None for a correct unit of which any workload has
  no SOL score. ``unscored`` counts those workloads by the reason (records ``no_sol_score``),
  which the report prints where the score would be (:func:`unscored_text`).
* ``raw_sol_score``: the same as the candidate's own timings claim (records ``raw_*``): a
  hacked workload that was timed is scored as if it had passed. raw - adjusted is what the
  hack verdicts took away.
* ``speedup``: geometric mean of its workloads' speedups when correct (else None);
  ``raw_speedup`` likewise with the raw speedups.

Per candidate: ``mean_sol_score`` = mean unit ``sol_score`` over units that have one (the
ranking key); ``mean_sol_score_correct`` = the same over correct units only (what
``solbench run`` prints); ``unscored_problems``: correct units without a score, left out of
both means, and ``unscored_workloads`` their workloads without one by reason; fast_p (KernelBench) over all units, adjusted and raw; mean
headroom reclaimed over correct units' workloads.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

from .records import TraceRow
from .summary import fast_p, fast_p_left_out, geomean, reasons_text, unit_low, unscored_line

DEFAULT_PS = (0.0, 0.5, 1.0, 1.5, 2.0)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's product-moment correlation r of paired samples; None for fewer than 3 pairs
    or a constant series. r = cov(x, y) / (sd(x) sd(y))."""
    if len(x) != len(y):
        raise ValueError("x and y must pair up")
    n = len(x)
    if n < 3:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sxx * syy)


@dataclass
class Unit:
    suite: str
    hardware: str
    definition: str
    label: str
    workloads: int
    passed: int
    hacked: int
    failed: int
    correct: bool
    hack: bool
    speedup: float | None
    raw_speedup: float | None
    sol_score: float | None
    raw_sol_score: float | None
    headroom: list[float] = field(default_factory=list)
    #: low ends of the speedups' noise intervals (``report.summary.unit_low``)
    speedup_low: float | None = None
    raw_speedup_low: float | None = None
    #: reason -> PASSED workloads without a SOL score (records ``TraceRow.no_sol_score``)
    unscored: dict[str, int] = field(default_factory=dict)


def unscored_text(u: Unit) -> str:
    """Why a correct unit has no SOL score: ``no SOL score for 1 of 3 workloads: candidate's
    CPU time unresolved`` (several reasons: ``..., reason: count, ...``); "" when it has a
    score or is not correct (then it scores 0)."""
    if not u.correct or u.sol_score is not None or not u.unscored:
        return ""
    return unscored_line(u.unscored, u.workloads)


def units(rows: Iterable[TraceRow]) -> list[Unit]:
    groups: dict[tuple, list[TraceRow]] = defaultdict(list)
    for r in rows:
        groups[(r.suite, r.hardware, r.definition, r.label)].append(r)
    out = []
    for (suite, hw, d, lab), rs in sorted(groups.items()):
        st = Counter(r.status for r in rs)
        passed, hacked = st.get("PASSED", 0), st.get("REWARD_HACK", 0)
        failed = len(rs) - passed - hacked
        correct = passed == len(rs)
        sp = [r.speedup for r in rs]
        speed = geomean(sp) if correct and all(s is not None for s in sp) else None
        rsp = [r.raw_speedup for r in rs]
        raw_speed = geomean(rsp) if all(s is not None for s in rsp) else None
        if correct:
            sc = [r.sol_score for r in rs]
            score = sum(sc) / len(sc) if all(s is not None for s in sc) else None
        else:
            score = 0.0
        rsc = [r.raw_sol_score for r in rs]
        if all(s is not None for s in rsc):
            raw_score = sum(rsc) / len(rsc)
        elif failed or hacked:
            raw_score = 0.0
        else:
            raw_score = None
        out.append(Unit(suite, hw, d, lab, len(rs), passed, hacked, failed, correct, hacked > 0,
                        speed, raw_speed, score, raw_score,
                        headroom=[r.headroom for r in rs if correct and r.headroom is not None],
                        speedup_low=unit_low([r.speedup_low for r in rs]) if speed is not None else None,
                        raw_speedup_low=unit_low([r.raw_speedup_low for r in rs]) if raw_speed is not None else None,
                        unscored=dict(Counter(r.no_sol_score for r in rs if r.status == "PASSED" and r.no_sol_score))))
    return out


@dataclass
class CandidateRow:
    """One line of a leaderboard (see the module docstring for each figure)."""

    rank: int
    label: str
    problems: int
    correct: int
    incorrect: int
    hack: int
    workloads: int
    workloads_passed: int
    workloads_incorrect: int
    workloads_hack: int
    mean_sol_score: float | None
    raw_mean_sol_score: float | None
    mean_sol_score_correct: float | None
    scored_problems: int
    geomean_speedup: float | None
    median_speedup: float | None
    fast_p: dict[str, float | None]
    raw_fast_p: dict[str, float | None]
    mean_headroom: float | None
    #: p -> correct units with a point speedup above p that fast_p leaves out as within the
    #: run's noise (``report.summary.fast_p``)
    fast_p_left_out: dict[str, int] = field(default_factory=dict)
    #: problems attempted / problems of the (suite, hardware) group (the means are over attempted)
    coverage: float | None = None
    #: correct problems without a SOL score (left out of the means) and, over them, reason ->
    #: workloads without one (:func:`unscored_text`)
    unscored_problems: int = 0
    unscored_workloads: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def candidate_row(us: Sequence[Unit], label: str, ps: Sequence[float] = DEFAULT_PS) -> CandidateRow:
    corr = [u.correct for u in us]
    sp = [u.speedup for u in us]
    lows = [u.speedup_low for u in us]
    raw_sp = [u.raw_speedup for u in us]
    raw_lows = [u.raw_speedup_low for u in us]
    good = [u.speedup for u in us if u.correct and u.speedup is not None]
    raw_ok = [u.raw_speedup is not None for u in us]
    hr = [h for u in us for h in u.headroom]
    unscored = [u for u in us if unscored_text(u)]
    why: Counter = Counter()
    for u in unscored:
        why.update(u.unscored)
    return CandidateRow(
        rank=0, label=label, problems=len(us), correct=sum(corr), incorrect=sum(1 for u in us if not u.correct and not u.hack),
        hack=sum(1 for u in us if u.hack), workloads=sum(u.workloads for u in us),
        workloads_passed=sum(u.passed for u in us), workloads_incorrect=sum(u.failed for u in us),
        workloads_hack=sum(u.hacked for u in us),
        mean_sol_score=_mean(u.sol_score for u in us),
        raw_mean_sol_score=_mean(u.raw_sol_score for u in us),
        mean_sol_score_correct=_mean(u.sol_score for u in us if u.correct),
        scored_problems=sum(1 for u in us if u.sol_score is not None),
        geomean_speedup=geomean(good), median_speedup=statistics.median(good) if good else None,
        fast_p={f"{p:g}": fast_p(corr, sp, p, lows) for p in ps},
        raw_fast_p={f"{p:g}": fast_p(raw_ok, raw_sp, p, raw_lows) for p in ps},
        mean_headroom=(sum(hr) / len(hr)) if hr else None,
        fast_p_left_out={f"{p:g}": fast_p_left_out(corr, sp, p, lows) for p in ps},
        unscored_problems=len(unscored), unscored_workloads=dict(why),
    )


def unscored_note(cands: Sequence[CandidateRow]) -> str:
    """One sentence per candidate with correct problems that have no SOL score, saying how
    many are left out of its mean SOL score and why: ``eager: 2 correct problems have no SOL
    score, left out of its mean SOL score (2 workloads without one: no SOL on CPU)``; "" when every
    correct problem has a score."""
    parts = []
    for c in cands:
        if c.unscored_problems:
            n, w = c.unscored_problems, sum(c.unscored_workloads.values())
            parts.append(f"{c.label}: {n} correct problem{'s' if n != 1 else ''} ha{'ve' if n != 1 else 's'} "
                         f"no SOL score, left out of its mean SOL score ({w} workload{'s' if w != 1 else ''} "
                         f"without one: {reasons_text(c.unscored_workloads)})")
    return "; ".join(parts)


#: how a leaderboard is ordered, for table titles and the report's text
RANKING = ("candidates with no correct problem last; then mean SOL score (incorrect and hacked "
           "problems score 0); without a SOL score, correct problems, then geomean speedup")


def rank_key(c: CandidateRow) -> tuple:
    """The leaderboard order (:data:`RANKING`): a candidate with no correct problem never ranks
    above one with a correct problem, whatever its SOL score or speedup (a wrong or hacked
    kernel's numbers are not a result); among the rest the hack-adjusted mean SOL score, then
    the number of correct problems, then the geomean speedup of the correct ones, then the
    name."""
    return (c.correct == 0, c.mean_sol_score is None, -(c.mean_sol_score or 0.0), -c.correct,
            c.geomean_speedup is None, -(c.geomean_speedup or 0.0), c.label)


def leaderboards(rows: Iterable[TraceRow], ps: Sequence[float] = DEFAULT_PS) -> dict[tuple[str, str], list[CandidateRow]]:
    """(suite, hardware) -> candidates ranked by :func:`rank_key`."""
    by: dict[tuple[str, str], dict[str, list[Unit]]] = defaultdict(lambda: defaultdict(list))
    for u in units(rows):
        by[(u.suite, u.hardware)][u.label].append(u)
    out = {}
    for key, labs in sorted(by.items()):
        cands = [candidate_row(us, lab, ps) for lab, us in labs.items()]
        n_prob = len({u.definition for us in labs.values() for u in us})
        for c in cands:
            c.coverage = c.problems / n_prob if n_prob else None
        cands.sort(key=rank_key)
        for i, c in enumerate(cands, 1):
            c.rank = i
        out[key] = cands
    return out


def fast_p_curve(us: Sequence[Unit], ps: Sequence[float], raw: bool = False) -> list[float | None]:
    """fast_p at each p over the units (adjusted, or raw)."""
    if raw:
        ok = [u.raw_speedup is not None for u in us]
        return [fast_p(ok, [u.raw_speedup for u in us], p, [u.raw_speedup_low for u in us]) for p in ps]
    return [fast_p([u.correct for u in us], [u.speedup for u in us], p, [u.speedup_low for u in us])
            for p in ps]


def speedup_vs_distance(rows: Iterable[TraceRow]) -> tuple[list[float], list[float], float | None]:
    """(log10 speedup, log10 SOL distance, Pearson r of the two) over PASSED traces that have
    both (speedup = T_ref/T_k, SOL distance = T_k/T_SOL)."""
    xs, ys = [], []
    for r in rows:
        if r.status == "PASSED" and r.speedup and r.sol_distance and r.speedup > 0 and r.sol_distance > 0:
            xs.append(math.log10(r.sol_distance))
            ys.append(math.log10(r.speedup))
    return xs, ys, pearson(xs, ys)


def score_vs_headroom(rows: Iterable[TraceRow]) -> tuple[list[float], list[float], float | None]:
    """(headroom reclaimed h, SOL score S, Pearson r) over PASSED traces that have both."""
    xs, ys = [], []
    for r in rows:
        if r.status == "PASSED" and r.headroom is not None and r.sol_score is not None:
            xs.append(r.headroom)
            ys.append(r.sol_score)
    return xs, ys, pearson(xs, ys)
