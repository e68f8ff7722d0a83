"""SOL score (SOL-ExecBench) and headroom reclaimed. Source: docs/formats.md.

    S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL))        h = (T_b - T_k) / (T_b - T_SOL),  S = 1/(2 - h)

T_k candidate time, T_b scoring-baseline time (measured in the same run and named), T_SOL the
speed-of-light bound, all in ms. S = 0.5 at the baseline, 1 at SOL. Upstream: when
T_b <= T_SOL, S = 1 if T_k <= T_SOL else 0; T_k < T_SOL gives S > 1 there. solbench never
scores above 1: T_k < T_SOL (or T_b <= T_SOL) is a finding, a broken bound or a broken
measurement, recorded as such (``finding``), with the score capped at 1.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field


class ScoreResult(BaseModel):
    """Result of :func:`sol_score`. Times in ms."""

    score: float | None = Field(description="SOL score in [0, 1]; None when the inputs are unusable")
    raw_score: float | None = Field(description="the upstream formula's value, uncapped (may exceed 1)")
    h: float | None = Field(description="headroom reclaimed (T_b - T_k)/(T_b - T_SOL); 1 at SOL, 0 at baseline")
    t_k_ms: float
    t_b_ms: float
    t_sol_ms: float
    baseline: str = Field("eager", description="what T_b measured: eager reference, torch.compile, ...")
    finding: dict | None = Field(None, description="{check, severity, message, evidence} when T_k or T_b < T_SOL")


def sol_score(t_k_ms: float, t_b_ms: float, t_sol_ms: float, baseline: str = "eager") -> ScoreResult:
    """SOL score of a candidate time against a baseline time and the bound.

    Args:
        t_k_ms: candidate time (ms, > 0).
        t_b_ms: scoring-baseline time (ms, > 0), measured in the same run.
        t_sol_ms: speed-of-light time (ms, > 0).
        baseline: name of the baseline (e.g. "eager", "torch.compile").

    Returns:
        ScoreResult; ``finding`` is set (check ``sol.below_bound``) when the candidate or the
        baseline is faster than T_SOL, and the score is then capped at 1.

    Raises:
        ValueError: a time is not a finite positive number.
    """
    for n, v in (("t_k_ms", t_k_ms), ("t_b_ms", t_b_ms), ("t_sol_ms", t_sol_ms)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{n} must be a finite positive number of ms, got {v!r}")
    finding = None
    if t_b_ms <= t_sol_ms:
        # upstream rule, kept: the baseline is at or below SOL so the scale is degenerate
        raw = 1.0 if t_k_ms <= t_sol_ms else 0.0
        h = None
        finding = {
            "check": "sol.baseline_below_bound", "severity": "advisory",
            "message": f"baseline ({baseline}) {t_b_ms:.6g} ms is not slower than T_SOL "
                       f"{t_sol_ms:.6g} ms: the bound or the baseline measurement is broken",
            "evidence": {"t_b_ms": t_b_ms, "t_sol_ms": t_sol_ms},
        }
    else:
        raw = 1.0 / (1.0 + (t_k_ms - t_sol_ms) / (t_b_ms - t_sol_ms))
        h = (t_b_ms - t_k_ms) / (t_b_ms - t_sol_ms)
    if t_k_ms < t_sol_ms:
        finding = {
            "check": "sol.below_bound", "severity": "advisory",
            "message": f"candidate {t_k_ms:.6g} ms is faster than T_SOL {t_sol_ms:.6g} ms: "
                       "a broken bound or a broken measurement, not a score above 1",
            "evidence": {"t_k_ms": t_k_ms, "t_sol_ms": t_sol_ms, "ratio": t_k_ms / t_sol_ms},
        }
    score = min(raw, 1.0)
    return ScoreResult(score=score, raw_score=raw, h=h, t_k_ms=t_k_ms, t_b_ms=t_b_ms,
                       t_sol_ms=t_sol_ms, baseline=baseline, finding=finding)
