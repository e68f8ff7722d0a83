"""Whether a pair's speedup is resolved: the paired-block rule (docs/harness.md, "Resolved
speedups").

The candidate and the eager reference are timed in interleaved blocks, in the order
C R R C C R R C ... (ABBA: a drift of the host that is linear in time over two block pairs
favours neither side). Load on a shared host does not stay still: it comes in bursts and
its mean drifts, so two medians taken seconds apart can differ several-fold for the same
code (the eager reference against itself read 1.48 vs 7.13 ms on a loaded 2-core host,
4.8x, and was printed ``>=2.47x``). A ratio of the two sides' medians over the whole run
cannot tell such load from a real difference; a ratio per block pair (the two blocks timed
next to each other) can, because load that comes and goes in bursts lands on different
sides in different pairs.

A speedup (a ratio outside the noise, or a bound with one CPU side unresolved) is
**resolved** only when every one of these holds; otherwise it is recorded with
``resolved`` False and the reason, no bound is claimed and reports count it as noise:

1. at least :data:`MIN_PAIRS_CPU` (CPU) / :data:`MIN_PAIRS_CUDA` (CUDA) block pairs;
2. every pair's ratio (reference block median / candidate block median; a side below the
   run's noise floor enters at the noise floor, the largest time it may have) lies on
   the same side of 1, beyond ``1 +- margin`` (:data:`MARGIN_CPU` 5%, :data:`MARGIN_CUDA`
   2%, the A/A goal band; on the CPU widened to ``(1 + margin) / (1 - s) - 1`` where ``s``
   is the larger share of its windows a side spent waiting for a CPU, the most that
   waiting alone can stretch it): all pairs agree (with 4 pairs and ratios that are noise around
   1, all four land beyond the margin on one side with probability at most 2 x 0.5^4 =
   1/8, and in practice far less since most land inside the margin);
3. the host was not loaded: the share of the timed windows (CUDA: the parent's round
   trips around the calls) that the parent's calling thread and the worker's threads spent
   runnable but waiting for a CPU
   (``/proc/<pid>/task/*/schedstat``; :func:`solbench.proc.procfs.process_wait_ms`; the
   trusted reference's threads read at each block's start and end, between which they run
   only inside its windows, the candidate's main thread around each call) is at most
   :data:`LOAD_WAIT_SHARE` on each side, and on the CPU known (a kernel without schedstat
   resolves no CPU speedup: the block agreement alone resolved 6% of same-code pairs under a model of
   drifting load);
4. CPU only: the no-op baseline did not move: the no-op windows measured in the trusted
   reference worker at its first block and again at its last have medians within a factor
   :data:`NOOP_DRIFT` of each other.

The rule judges claims, never a status: an unresolved pair is still PASSED with its
latencies, and ``performance.speedup_factor`` keeps the ratio of medians.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from ..proc.procfs import process_wait_ms  # noqa: F401 - its home is solbench.proc; kept for callers

#: fewest block pairs for a resolved CPU speedup (4: the CPU default is 12 calls per side in
#: 4 blocks of 3)
MIN_PAIRS_CPU = 4
#: fewest block pairs for a resolved CUDA speedup (the CUDA default times 2 blocks per side:
#: each block is a profiler session of its own)
MIN_PAIRS_CUDA = 2
#: every block ratio must be beyond 1 +- this for a resolved speedup (CPU, CUDA)
MARGIN_CPU = 0.05
MARGIN_CUDA = 0.02
#: most of a side's timed windows (sum over calls) spent waiting for a CPU, as a share
LOAD_WAIT_SHARE = 0.10
#: the no-op medians at the first and the last reference block must agree within this factor
NOOP_DRIFT = 1.5


def split_sizes(total: int, parts: int) -> list[int]:
    """``total`` calls in ``parts`` blocks as even as can be, larger blocks first
    (``split_sizes(10, 4) == [3, 3, 2, 2]``); blocks of 0 calls are dropped."""
    parts = max(1, parts)
    return [s for s in (total // parts + (1 if i < total % parts else 0) for i in range(parts)) if s > 0]


def block_medians(samples: list[float | None], sizes: list[int]) -> list[float | None]:
    """Median (ms) of each block of ``samples`` (blocks concatenated in order, ``sizes``
    calls each); None for a block without a finite sample or when the sizes do not add up."""
    if sum(sizes) != len(samples):
        return []
    out, pos = [], 0
    for n in sizes:
        xs = [x for x in samples[pos:pos + n] if x is not None and math.isfinite(x)]
        pos += n
        out.append(statistics.median(xs) if xs else None)
    return out


@dataclass
class SideEvidence:
    """What the rule reads of one side: its samples (ms) in block order and the block sizes;
    whether the side's CPU time is resolved (None on CUDA) and its resolution (ms); the
    run-queue wait (ms) and the window (ms) of each call, None where unknown; ``block_wait_ms``:
    where the worker's threads were read once a block rather than around each call (the
    trusted reference: ``timed.worker_wait_ms``), their wait in each block (ms, None where
    unknown), which ``wait_ms`` then leaves out; None when ``wait_ms`` holds it all."""

    samples: list[float | None]
    sizes: list[int]
    resolved: bool | None = None
    resolution_ms: float | None = None
    wait_ms: list[float | None] = field(default_factory=list)
    window_ms: list[float] = field(default_factory=list)
    block_wait_ms: list[float | None] | None = None


def _wait_share(s: SideEvidence) -> float | None:
    """The share of a side's windows (summed) it spent waiting for a CPU; None when unknown."""
    if not s.wait_ms or len(s.wait_ms) != len(s.window_ms) or any(w is None for w in s.wait_ms):
        return None
    extra = 0.0
    if s.block_wait_ms is not None:
        if not s.block_wait_ms or any(w is None for w in s.block_wait_ms):
            return None
        extra = sum(s.block_wait_ms)
    tot = sum(s.window_ms)
    return (sum(s.wait_ms) + extra) / tot if tot > 0 else None


def pair_resolution(cand: SideEvidence, ref: SideEvidence, *, is_cuda: bool,
                    noop_first: list[float] | None = None, noop_last: list[float] | None = None,
                    order: list[str] | None = None) -> dict[str, Any]:
    """The paired-block rule (module docstring) for one pair. Block b of the candidate is
    paired with block b of the reference. Returns the trace's ``speedup_resolution`` block:
    ``resolved`` (bool), ``reason`` (None when resolved, else why not, one line), ``rule``,
    ``block_ratios`` (reference block median / candidate block median per pair, each side
    floored at its resolution when unresolved), ``interval`` ([min, max] of them),
    ``direction`` ("faster" / "slower" / None), ``cand_block_ms`` / ``ref_block_ms`` (block
    medians), ``load_wait_share`` ({candidate, reference}), ``noop_median_ms`` ([first,
    last]), ``order`` (the blocks' timing order, e.g. "CRRCCRRC"). Raises nothing."""
    min_pairs = MIN_PAIRS_CUDA if is_cuda else MIN_PAIRS_CPU
    margin = MARGIN_CUDA if is_cuda else MARGIN_CPU
    cm, rm = block_medians(cand.samples, cand.sizes), block_medians(ref.samples, ref.sizes)

    def floor(m: float | None, side: SideEvidence) -> float | None:
        if m is None:
            return None
        if side.resolved is False and side.resolution_ms is not None and math.isfinite(side.resolution_ms):
            return max(m, side.resolution_ms)
        return m

    ratios = []
    for c, r in zip(cm, rm):
        c, r = floor(c, cand), floor(r, ref)
        ratios.append(r / c if c and r and c > 0 else None)
    good = [x for x in ratios if x is not None and math.isfinite(x)]
    out: dict[str, Any] = {
        "rule": (f"paired blocks: >= {min_pairs} pairs, every block ratio beyond 1 +- {margin:g} on one side"
                 + ("" if is_cuda else f", run-queue wait <= {LOAD_WAIT_SHARE:g} of the windows, "
                    f"no-op baseline within {NOOP_DRIFT:g}x")),
        "block_ratios": [None if x is None else round(x, 6) for x in ratios],
        "interval": [min(good), max(good)] if good else None,
        "cand_block_ms": cm, "ref_block_ms": rm,
        "order": "".join(order) if order else None,
        "direction": None,
    }
    reasons = []
    if len(cm) != len(rm):
        reasons.append(f"{len(cm)} candidate block(s) against {len(rm)} reference block(s): not paired")
    elif len(good) < min_pairs or len(good) != len(ratios):
        reasons.append(f"{len(good)} block pair(s) with both medians, {min_pairs} needed")
    shares = {"candidate": _wait_share(cand), "reference": _wait_share(ref)}
    known = [v for v in shares.values() if v is not None]
    if not is_cuda and known:
        # a side that waited for a CPU a share s of its windows may read up to 1 / (1 - s)
        # slower for that alone: a ratio no further from 1 than that is not the code's
        s_max = min(max(known), 0.99)
        margin = (1 + margin) / (1 - s_max) - 1
    out["margin"] = margin
    if good:
        if all(x > 1 + margin for x in good):
            out["direction"] = "faster"
        elif all(x < 1 / (1 + margin) for x in good):
            out["direction"] = "slower"
        else:
            reasons.append(f"block ratios {min(good):.3g}-{max(good):.3g} do not all lie beyond "
                           f"1 +- {margin:.3g} on one side")
    out["load_wait_share"] = shares
    loaded = {k: v for k, v in shares.items() if v is not None and v > LOAD_WAIT_SHARE}
    if is_cuda and loaded:
        # CUDA samples are device spans, which waiting stretches only through a launch-bound
        # call's gaps: a loaded host refuses the claim (no margin is widened; unknown waits
        # refuse nothing on CUDA)
        reasons.append("loaded host: " + ", ".join(f"{k} waited for a CPU {v:.0%} of its round trips"
                                                   for k, v in loaded.items()))
    if not is_cuda:
        unknown = [k for k, v in shares.items() if v is None]
        if unknown:
            # without the wait figures load cannot be told from a difference: with 4 pairs and
            # each block's mean drifting by up to 30% on its own, the block agreement alone
            # still resolved 6% of same-code pairs (tests/harness/test_pair_resolution.py)
            reasons.append(f"host load unknown ({' and '.join(unknown)}: no run-queue wait figures)")
        if loaded:
            reasons.append("loaded host: " + ", ".join(f"{k} waited for a CPU {v:.0%} of its windows"
                                                       for k, v in loaded.items()))
        a = statistics.median(noop_first) if noop_first else None
        b = statistics.median(noop_last) if noop_last else None
        out["noop_median_ms"] = [a, b]
        if a is not None and b is not None and a > 0 and b > 0 and max(a, b) / min(a, b) > NOOP_DRIFT:
            reasons.append(f"the no-op baseline moved from {a:.3g} to {b:.3g} ms during the timing")
    out["resolved"] = not reasons
    out["reason"] = "; ".join(reasons) if reasons else None
    return out
