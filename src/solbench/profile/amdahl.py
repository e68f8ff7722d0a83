"""Amdahl projection: what evaluated problems would save end to end on a profiled workload.

Two projections, always reported side by side and named (docs/profiling.md, "Projection"):

``amdahl_mapped`` (solbench's): each evaluated problem j is mapped, through the explicit
problem map (``problem_map.json``, :func:`load_problem_map`), to the profiled kernel groups it
replaces; p_j is their share of the unprofiled wall-clock step. With s_j the problem's
speedup (losing or incorrect candidates count as 1x)::

    time_saved = sum_j p_j * (1 - 1 / s_j)        end_to_end_speedup = 1 / (1 - time_saved)

A kernel group claimed by several evaluated problems counts once, for the problem with the
largest s_j (the kernel one would deploy).

``study_simple`` (the study's headline formula)::

    gain = addressable_fraction * win_rate * (1 - 1 / median_speedup)

e.g. 0.582 * 0.417 * (1 - 1/1.552) = 8.63% for DLRM-Bench on DLRM.

Per-problem speedup s_j: only *correct* solutions count, those that PASSED every workload
they were evaluated on (a faster kernel that is wrong on some input is not one to deploy).
For each correct solution, the geometric mean over its workloads of the trace speedup
(``performance.speedup_factor``, else reference_latency_ms / latency_ms), a speedup below 1
counting 1x; s_j is the best correct solution's, and 1x (nothing saved, ``best_solution``
None) when the problem has no correct solution. A problem is *won* when its best correct
solution has a geometric-mean raw speedup above 1; ``median_speedup`` is the median of the
won problems' speedups (None when nothing was won) and ``win_rate`` = won / evaluated
problems.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..errors import SpecError

# ------------------------------------------------------------------ formulas


def amdahl_time_saved(shares: Sequence[float], speedups: Sequence[float]) -> float:
    """Fraction of the step saved: sum_j p_j (1 - 1/s_j) (Amdahl 1967).

    Args:
        shares: p_j, fractions of wall time in [0, 1] whose sum is at most 1.
        speedups: s_j > 0 (values below 1 are used as given; clamp first for "losers count 1x").
    Raises ValueError on a length mismatch, a share outside [0, 1], a total above 1, or s <= 0.
    """
    if len(shares) != len(speedups):
        raise ValueError(f"{len(shares)} shares but {len(speedups)} speedups")
    total = 0.0
    for p, s in zip(shares, speedups):
        if not (0.0 <= p <= 1.0):
            raise ValueError(f"share {p} outside [0, 1]")
        if not s > 0:
            raise ValueError(f"speedup {s} must be > 0")
        total += p * (1.0 - 1.0 / s)
    if sum(shares) > 1.0 + 1e-9:
        raise ValueError(f"shares add up to {sum(shares)} > 1")
    return total


def end_to_end_speedup(time_saved: float) -> float:
    """1 / (1 - time_saved); time_saved < 1."""
    if time_saved >= 1.0:
        raise ValueError("time_saved must be < 1")
    return 1.0 / (1.0 - time_saved)


def study_projection(addressable_fraction: float, win_rate: float, median_speedup: float) -> float:
    """The study's headline gain: f * w * (1 - 1/m) (0.582 * 0.417 * (1 - 1/1.552) = 0.0863).
    Returns 0 when nothing was won (median_speedup <= 0 or win_rate == 0)."""
    if win_rate == 0 or median_speedup <= 0:
        return 0.0
    return addressable_fraction * win_rate * (1.0 - 1.0 / median_speedup)


def geomean(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("geomean of nothing")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


# ------------------------------------------------------------------ problem map


@dataclass(frozen=True)
class Selector:
    """One way a problem's kernels are recognised; every given field must hold."""

    ops: tuple[str, ...] = ()
    tags: tuple[re.Pattern, ...] = ()
    phase: tuple[str, ...] = ()
    kernel: re.Pattern | None = None
    classes: tuple[str, ...] = ()
    subclasses: tuple[str, ...] = ()

    def matches(self, group: dict[str, Any]) -> bool:
        if self.ops and not set(self.ops) & set(group.get("ops") or [group.get("op", "")]):
            return False
        if self.tags and not any(rx.search(t) for rx in self.tags for t in group.get("tags", [])):
            return False
        if self.phase and group.get("phase", "forward") not in self.phase:
            return False
        if self.kernel is not None and not self.kernel.search(group.get("kernel", "")):
            return False
        if self.classes and group.get("cls") not in self.classes:
            return False
        if self.subclasses and group.get("subclass") not in self.subclasses:
            return False
        return True


@dataclass(frozen=True)
class MapEntry:
    id: str
    match: tuple[str, ...]
    replaces: tuple[Selector, ...]
    description: str = ""

    def applies_to(self, problem: str) -> bool:
        n = problem.lower().replace("-", "_")
        return any(fnmatch.fnmatchcase(n, g.lower()) for g in self.match)

    def claims(self, group: dict[str, Any]) -> bool:
        return any(s.matches(group) for s in self.replaces)


_SEL_KEYS = {"ops", "tags", "phase", "kernel", "classes", "subclasses"}


def _parse_map(data: Any, path: str) -> list[MapEntry]:
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise SpecError(path, "entries", "a problem map is an object with an 'entries' list")
    out = []
    for i, e in enumerate(data["entries"]):
        where = f"entries[{i}]"
        if not isinstance(e, dict) or not e.get("id") or not isinstance(e.get("match"), list) or not e["match"]:
            raise SpecError(path, where, "each entry needs 'id' and a non-empty 'match' list")
        sels = []
        for j, s in enumerate(e.get("replaces") or []):
            bad = set(s) - _SEL_KEYS
            if bad:
                raise SpecError(path, f"{where}.replaces[{j}]", f"unknown selector keys {sorted(bad)}")
            try:
                sels.append(Selector(
                    ops=tuple(s.get("ops", ())), tags=tuple(re.compile(t) for t in s.get("tags", ())),
                    phase=tuple(s.get("phase", ())),
                    kernel=re.compile(s["kernel"]) if s.get("kernel") else None,
                    classes=tuple(s.get("classes", ())), subclasses=tuple(s.get("subclasses", ()))))
            except re.error as err:
                raise SpecError(path, f"{where}.replaces[{j}]", f"bad regex: {err}") from None
        if not sels:
            raise SpecError(path, f"{where}.replaces", "an entry must replace something")
        out.append(MapEntry(e["id"], tuple(e["match"]), tuple(sels), e.get("description", "")))
    return out


def load_problem_map(path: str | Path | None = None) -> list[MapEntry]:
    """The problem -> replaced-kernels map: the bundled ``problem_map.json`` or ``path``.
    Raises SpecError naming the file and entry on a malformed map."""
    if path is None:
        text = resources.files("solbench.profile").joinpath("problem_map.json").read_text()
        where = "solbench/profile/problem_map.json"
    else:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise SpecError(path, "", f"cannot read: {e.strerror}") from None
        where = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(where, f"line {e.lineno}", f"invalid JSON: {e.msg}") from None
    return _parse_map(data, where)


def entry_for(problem: str, entries: Sequence[MapEntry]) -> MapEntry | None:
    """First entry whose glob matches ``problem``'s definition name, or None."""
    for e in entries:
        if e.applies_to(problem):
            return e
    return None


# ------------------------------------------------------------------ results


@dataclass
class ProblemResult:
    """Best correct candidate of one problem over its traces (module docstring for the rules)."""

    problem: str
    best_solution: str | None  # None: no solution passed every workload
    speedup: float  # clamped at 1 (losers count 1x; no correct solution: 1)
    raw_speedup: float  # geometric mean without clamping (no correct solution: 1)
    won: bool
    workloads: int
    passed: int
    #: raw geometric-mean speedup of every solution (workloads that did not pass count 1x)
    solutions: dict[str, float] = field(default_factory=dict)
    #: solutions that passed every workload
    correct_solutions: list[str] = field(default_factory=list)


def _trace_speedup(ev: dict[str, Any]) -> float | None:
    if ev.get("status") != "PASSED":
        return None
    perf = ev.get("performance") or {}
    if any((ev.get(k) or {}).get("resolved") is False for k in ("timing", "reference_timing")):
        # a time not above the run's noise floor gives no ratio, only the bound the other side
        # proves, counted as in the suite summaries (report.summary.counted_bound)
        from ..report.summary import counted_bound
        from ..spec.trace import TimingStats, speedup_bound

        b = ev.get("speedup_bound") or {}
        v = b.get("value") if isinstance(b, dict) else None
        if b.get("op") in ("<=", ">=") and isinstance(v, (int, float)) and not isinstance(v, bool) \
                and math.isfinite(v) and v > 0:
            return counted_bound((b["op"], float(v)))
        try:
            ts = [TimingStats.model_validate(ev[k]) for k in ("timing", "reference_timing")]
        except Exception:  # noqa: BLE001 - a side missing or malformed: no bound, as before
            return None
        return counted_bound(speedup_bound(*ts))
    s = perf.get("speedup_factor")
    if s is None and perf.get("reference_latency_ms") and perf.get("latency_ms"):
        s = perf["reference_latency_ms"] / perf["latency_ms"]
    return float(s) if s is not None and s > 0 and math.isfinite(s) else None


def load_results(path: str | Path, include_unverified: bool = False) -> list[dict[str, Any]]:
    """Read a results JSONL through the trace store (``solbench.store.read_store``: lines
    solbench did not write are excluded and reported on stderr). Raises SpecError naming the
    file and line on an invalid line of a legacy file, or when no trace is left."""
    from ..store import read_store, warn_unverified

    p = Path(path)
    if not p.exists():
        raise SpecError(p, "", "cannot read: No such file or directory")
    r = read_store(p, include_unverified=include_unverified)
    if r.rejected or r.gaps:
        warn_unverified(r)
    if not r.traces:
        raise SpecError(p, "", "no traces in the file" + (" solbench wrote" if r.rejected else ""))
    return [t.model_dump(mode="json") for t in r.traces]


def problem_results(traces: Iterable[dict[str, Any]]) -> dict[str, ProblemResult]:
    """Group traces by definition and pick each problem's best correct solution."""
    by: dict[str, dict[str, dict[str, float | None]]] = {}
    for t in traces:
        wl = t["workload"].get("uuid", "") if isinstance(t["workload"], dict) else str(t["workload"])
        by.setdefault(t["definition"], {}).setdefault(t["solution"], {})[wl] = _trace_speedup(t["evaluation"])
    out = {}
    for prob, sols in by.items():
        best = None
        per_sol, correct = {}, []
        most_wl = max(len(wl) for wl in sols.values())
        for sol, wl in sols.items():
            raw = [s if s is not None else 1.0 for s in wl.values()]
            per_sol[sol] = geomean(raw)
            if not all(s is not None for s in wl.values()):
                continue
            correct.append(sol)
            r = ProblemResult(prob, sol, geomean([max(1.0, x) for x in raw]), geomean(raw),
                              won=geomean(raw) > 1.0, workloads=len(wl), passed=len(wl))
            if best is None or (r.speedup, r.raw_speedup) > (best.speedup, best.raw_speedup):
                best = r
        if best is None:
            passed = max(sum(s is not None for s in wl.values()) for wl in sols.values())
            best = ProblemResult(prob, None, 1.0, 1.0, won=False, workloads=most_wl, passed=passed)
        best.solutions = per_sol
        best.correct_solutions = sorted(correct)
        out[prob] = best
    return out


# ------------------------------------------------------------------ projection


def project(profile: dict[str, Any], traces: Sequence[dict[str, Any]], entries: Sequence[MapEntry] | None = None,
            fraction: str = "strict_wall") -> dict[str, Any]:
    """Both projections for one profile (a ProfileReport as a dict) and a list of traces.

    Args:
        profile: needs ``kernel_table`` (groups with ``share_wall``) and ``addressable_fraction``.
        traces: trace dicts (:func:`load_results`).
        entries: the problem map (default: the bundled one).
        fraction: which addressable fraction the study formula uses (strict_wall, loose_wall,
            strict_busy, loose_busy).
    Returns a JSON-ready dict: ``problems`` rows, ``unmapped`` problems, ``amdahl_mapped`` and
    ``study_simple`` blocks.
    """
    entries = list(entries) if entries is not None else load_problem_map()
    if fraction not in profile["addressable_fraction"]:
        raise ValueError(f"fraction must be one of {sorted(profile['addressable_fraction'])}")
    results = problem_results(traces)
    table = profile["kernel_table"]
    mapped: dict[str, MapEntry] = {}
    unmapped = []
    for prob in sorted(results):
        e = entry_for(prob, entries)
        if e is None:
            unmapped.append(prob)
        else:
            mapped[prob] = e
    # each kernel group goes to the claiming problem with the largest speedup
    owner: dict[int, str] = {}
    for gi, g in enumerate(table):
        claim = [p for p, e in mapped.items() if e.claims(g)]
        if claim:
            owner[gi] = max(claim, key=lambda p: (results[p].speedup, p))
    rows = []
    shares, speeds = [], []
    for prob in sorted(mapped):
        r = results[prob]
        e = mapped[prob]
        claimed = [gi for gi, g in enumerate(table) if e.claims(g)]
        mine = [gi for gi in claimed if owner.get(gi) == prob]
        p = min(1.0, sum(table[gi]["share_wall"] for gi in mine))
        shares.append(p)
        speeds.append(r.speedup)
        rows.append({"problem": prob, "map_entry": e.id, "best_solution": r.best_solution,
                     "speedup": r.speedup, "raw_speedup": r.raw_speedup, "won": r.won,
                     "workloads": r.workloads, "passed": r.passed,
                     "correct_solutions": r.correct_solutions,
                     "kernel_groups": len(mine), "kernel_groups_claimed": len(claimed),
                     "share_wall": p, "time_saved": p * (1.0 - 1.0 / r.speedup),
                     "kernels": [table[gi]["kernel"][:120] for gi in mine[:5]]})
    total_share = sum(shares)
    if total_share > 1.0:  # cannot happen with one owner per group and shares of one profile; guard
        shares = [s / total_share for s in shares]
    saved = amdahl_time_saved(shares, speeds) if shares else 0.0
    won = [r for r in results.values() if r.won]
    win_rate = len(won) / len(results) if results else 0.0
    med = statistics.median([r.raw_speedup for r in won]) if won else None
    f = float(profile["addressable_fraction"][fraction])
    return {
        "profile": {k: profile.get(k) for k in ("workload", "mode", "scale", "device", "device_name", "wall_ms")},
        "problems": rows,
        "unmapped": unmapped,
        "amdahl_mapped": {
            "name": "amdahl_mapped",
            "formula": "time_saved = sum_j p_j (1 - 1/s_j); speedup = 1/(1 - time_saved); "
                       "p_j = wall share of the kernels problem j replaces, s_j its best speedup (losers/failures 1x)",
            "share_wall_mapped": sum(shares), "time_saved": saved, "end_to_end_speedup": end_to_end_speedup(saved)},
        "study_simple": {
            "name": "study_simple",
            "formula": "addressable_fraction x win_rate x (1 - 1/median_speedup)",
            "addressable_fraction": f, "fraction": fraction, "problems_evaluated": len(results),
            "problems_won": len(won), "win_rate": win_rate, "median_speedup": med,
            "gain": study_projection(f, win_rate, med) if med is not None else 0.0},
    }
