"""``solbench compare A B``: per (problem, workload, candidate), is B faster, slower or the same
as A within noise, with the statistic named.

Like torch.utils.benchmark's Compare and nvbench's compare script, the verdict is not a bare
ratio. Two rules, the first that applies:

* ``mann-whitney-u`` when both traces keep at least :data:`MIN_SAMPLES` raw timing samples:
  the two-sided Mann-Whitney U test on the candidate's samples (Mann and Whitney 1947; normal
  approximation with tie correction and continuity correction, as in SciPy's
  ``mannwhitneyu(method="asymptotic")``). B is *faster*/*slower* when p < ``alpha`` AND the
  ratio of medians B/A differs from 1 by more than ``threshold`` (a significant but tiny
  shift is reported as *same*: with 50+ samples a 0.3% shift can be significant).
* ``ratio-of-medians`` otherwise: faster/slower when B/A is outside 1 +- ``noise``, the stated
  noise threshold (default 5%, about the run-to-run spread of our H200 A/A runs).

A pair where either side did not PASS gets the verdict ``status`` (``PASSED -> REWARD_HACK``
and so on) instead of a timing verdict. A pair where either run recorded the candidate's CPU
time as unresolved (``timing.resolved`` false: not above that run's noise floor,
docs/harness.md "Resolution of CPU times") gets ``unresolved in A`` / ``unresolved in B`` /
``unresolved in A and B``, no ratio and no test: such samples are noise of the subtracted
no-op baseline (an A/A pair of them read "slower" 28.9x at p = 0.0073). The reference's
resolution does not matter here: compare judges the candidate's samples alone.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Sequence

from .records import ResultSet, TraceRow

MIN_SAMPLES = 5


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test, normal approximation with tie and continuity
    corrections. Returns (U of ``a``, p-value). Raises ValueError for an empty sample."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples must be non-empty")
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        r = (i + j) / 2 + 1  # mid-rank, 1-based
        for k in range(i, j + 1):
            ranks[k] = r
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    r1 = sum(r for r, (_, g) in zip(ranks, pooled) if g == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    mu = n1 * n2 / 2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u1, 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return u1, min(1.0, p)


@dataclass
class Comparison:
    definition: str
    workload: str
    label: str
    axes: str
    status_a: str
    status_b: str
    median_a_ms: float | None
    median_b_ms: float | None
    ratio: float | None  # B / A of the medians (< 1: B faster)
    statistic: str  # mann-whitney-u | ratio-of-medians | status | resolution
    p_value: float | None
    verdict: str  # faster | slower | same | status | only in A | only in B | unresolved in A/B/A and B

    def to_json(self) -> dict:
        return asdict(self)


def _median(r: TraceRow) -> float | None:
    if r.samples_ms:
        return statistics.median(r.samples_ms)
    return r.latency_ms


def compare_rows(a: TraceRow | None, b: TraceRow | None, alpha: float = 0.01, threshold: float = 0.02,
                 noise: float = 0.05) -> Comparison:
    one = a or b
    base = dict(definition=one.definition, workload=one.workload, label=one.label, axes=one.axes)
    if a is None or b is None:
        return Comparison(**base, status_a=a.status if a else "-", status_b=b.status if b else "-",
                          median_a_ms=None, median_b_ms=None, ratio=None, statistic="-", p_value=None,
                          verdict="only in A" if b is None else "only in B")
    if a.status != "PASSED" or b.status != "PASSED":
        return Comparison(**base, status_a=a.status, status_b=b.status, median_a_ms=_median(a) if a.status == "PASSED" else None,
                          median_b_ms=_median(b) if b.status == "PASSED" else None, ratio=None,
                          statistic="status", p_value=None,
                          verdict="status" if a.status != b.status else f"both {a.status}")
    un_a = a.unresolved_side in ("candidate", "both")
    un_b = b.unresolved_side in ("candidate", "both")
    if un_a or un_b:
        which = "A and B" if un_a and un_b else "A" if un_a else "B"
        return Comparison(**base, status_a=a.status, status_b=b.status,
                          median_a_ms=None if un_a else _median(a), median_b_ms=None if un_b else _median(b),
                          ratio=None, statistic="resolution", p_value=None, verdict=f"unresolved in {which}")
    ma, mb = _median(a), _median(b)
    ratio = mb / ma if ma and mb else None
    if len(a.samples_ms) >= MIN_SAMPLES and len(b.samples_ms) >= MIN_SAMPLES:
        _, p = mann_whitney_u(a.samples_ms, b.samples_ms)
        moved = ratio is not None and abs(ratio - 1.0) > threshold
        verdict = ("faster" if ratio < 1 else "slower") if (p < alpha and moved) else "same"
        stat = "mann-whitney-u"
    else:
        p = None
        stat = "ratio-of-medians"
        verdict = "same" if ratio is None or abs(ratio - 1.0) <= noise else ("faster" if ratio < 1 else "slower")
    return Comparison(**base, status_a=a.status, status_b=b.status, median_a_ms=ma, median_b_ms=mb,
                      ratio=ratio, statistic=stat, p_value=p, verdict=verdict)


def compare(a: ResultSet, b: ResultSet, alpha: float = 0.01, threshold: float = 0.02, noise: float = 0.05,
            ignore_label: bool = False, label_a: str | None = None, label_b: str | None = None) -> list[Comparison]:
    """Pair A's and B's traces by (definition, workload uuid, candidate label) (or without the
    label when ``ignore_label``: then each side must hold one trace per workload, else
    ValueError naming the first workload with several) and compare each pair. ``label_a`` /
    ``label_b`` keep only that candidate on each side and pair without the label (candidate
    X of A against candidate Y of B, e.g. eager against compile in one file)."""
    if label_a is not None or label_b is not None:
        ignore_label = True

    def index(rs: ResultSet, side: str) -> dict:
        out: dict = {}
        want = label_a if side == "A" else label_b
        for r in rs.rows:
            if want is not None and r.label != want:
                continue
            k = (r.definition, r.workload) if ignore_label else (r.definition, r.workload, r.label)
            if k in out:
                if ignore_label:
                    raise ValueError(f"{side}: several candidates for {r.definition} workload {r.workload[:8]} "
                                     f"({out[k].label}, {r.label}); compare by label (drop --ignore-label)")
                # a later trace of the same key (a re-run appended to the file) replaces the earlier
            out[k] = r
        return out

    from .records import check_labels

    if label_a is not None:
        check_labels([label_a], (r.label for r in a.rows), "A: ")
    if label_b is not None:
        check_labels([label_b], (r.label for r in b.rows), "B: ")
    ia, ib = index(a, "A"), index(b, "B")
    out = []
    for k in sorted(set(ia) | set(ib)):
        c = compare_rows(ia.get(k), ib.get(k), alpha, threshold, noise)
        if ignore_label and k in ia and k in ib and ia[k].label != ib[k].label:
            c.label = f"{ia[k].label} -> {ib[k].label}"
        out.append(c)
    return out


def verdict_counts(cs: Sequence[Comparison]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in cs:
        out[c.verdict] = out.get(c.verdict, 0) + 1
    return out
