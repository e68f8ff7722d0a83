"""How many timed iterations a workload gets: a stated stopping rule instead of a fixed count.

The rule (two-stage, in the spirit of nvbench's relative-noise criterion and Stein's two-stage
sample size): each side (the candidate, the eager reference) is first timed for a pilot block
of ``n_min // 2`` iterations. From each side's pilot samples, the number of samples its median
needs is

    n = ceil((z * IQR / (target * median)) ** 2),   z = 1.57

that is, the smallest n at which the notch interval of the median, ``median +- 1.57 IQR /
sqrt(n)`` (McGill, Tukey and Larsen 1978, "Variations of box plots", The American
Statistician 32(1); about a 95% interval), is within ``+- target`` of the median. The run
takes the larger of the two sides' n, clamped to ``[n_min, n_max]``; the second block of each
side makes up the difference (never fewer than the pilot's iterations, so the two halves stay
interleaved as before). ``n_min`` and ``n_max`` are stated in the trace's timing notes with the
relative half-width the final sample reached.

Why it cannot help a candidate: every iteration, pilot or not, is a timed call on fresh inputs
with the same per-call checks; the number of verified timed iterations stays what the fixed
count ``n_max`` had, max(verify, verify_fraction x n_max), drawn among the iterations run (a
candidate wrong on a fraction of its calls is caught with the same probability); the checks
over iterations (plausibility, kernel sets, work after the clock) are judged on proportions;
and a noisier candidate only gets more iterations (up to ``n_max``, the former fixed count).
A noisy pilot never shortens the reference's sample below ``n_min``.
"""

from __future__ import annotations

import math
from typing import Sequence

from .timing import stats

#: z of the notch interval of a median (McGill, Tukey and Larsen 1978): about 95%
NOTCH_Z = 1.57


def _iqr_median(samples_ms: Sequence[float]) -> tuple[float, float, int] | None:
    """(IQR, median, n) of the finite ``samples_ms``; None with fewer than 2 of them or a
    median that is not positive."""
    xs = [x for x in samples_ms if x is not None and math.isfinite(x)]
    if len(xs) < 2:
        return None
    st = stats(xs)
    if not st["median_ms"] > 0:
        return None
    return st["iqr_ms"], st["median_ms"], len(xs)


def relative_halfwidth(samples_ms: Sequence[float], z: float = NOTCH_Z) -> float | None:
    """``z * IQR / sqrt(n) / median`` of ``samples_ms`` (ms, any count >= 2): the notch
    interval's half-width relative to the median. None when there are fewer than 2 finite
    samples or the median is not positive."""
    m = _iqr_median(samples_ms)
    if m is None:
        return None
    iqr, med, n = m
    return z * iqr / math.sqrt(n) / med


def iterations_needed(samples_ms: Sequence[float], target: float, z: float = NOTCH_Z) -> int | None:
    """Smallest n with ``z * IQR / sqrt(n) <= target * median`` (IQR and median of the pilot
    ``samples_ms``, ms). None when the pilot cannot say (fewer than 2 finite samples, median
    not positive). Raises ValueError for ``target <= 0``."""
    if not target > 0:
        raise ValueError(f"target relative noise must be > 0, got {target}")
    m = _iqr_median(samples_ms)
    if m is None:
        return None
    iqr, med, _ = m
    return max(1, math.ceil((z * iqr / (target * med)) ** 2))


def total_iterations(pilots: Sequence[Sequence[float]], n_min: int, n_max: int, target: float) -> int:
    """Iterations per side for the whole workload, from each side's pilot samples (module
    doc): the largest :func:`iterations_needed` over the sides, clamped to
    ``[n_min, n_max]``; ``n_max`` when a side's pilot cannot say. Raises ValueError when
    ``n_min > n_max`` or ``n_min < 2``."""
    if n_min < 2 or n_min > n_max:
        raise ValueError(f"iterations: need 2 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
    need = n_min
    for p in pilots:
        k = iterations_needed(p, target)
        if k is None:
            return n_max
        need = max(need, k)
    return min(need, n_max)
