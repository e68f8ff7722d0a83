"""Timing: statistics over kept samples and the segmentation of device activity into
timed iterations.

Protocol (both devices): before each timed iteration the worker flushes the cache (CUDA:
writes a buffer of at least 2x the device's L2; CPU: 2x the last-level cache, capped at
256 MiB), then times one call on a fresh input slot.

- CUDA: the whole timed loop records CUPTI's device activity: through cupti-python
  (harness/cupti_activity.py) in the default "streams" method when it is installed, else
  through ``torch.profiler`` (Kineto over CUPTI). In the "streams" method the flush and the
  end marker are fills on a marker stream of the worker's own (:func:`stream_segmentation`);
  in the "ranges" method each flush is a ``record_function("solbench::l2_flush")`` range, and
  right after each call (once the device is synchronised) a one-element fill in a
  ``solbench::call_end`` range marks the end. Either way the marker kernels delimit the
  iterations on the device timeline, and iteration *i*'s time is the span from the first to the last device activity
  (kernel, memcpy, memset; every stream) between flush *i* and end marker *i*. What the
  harness does after the call (copying returned outputs to the parent's buffers) falls after
  the end marker and is not timed. The sum of kernel durations is kept beside it. CUDA events around
  each call are the fallback (they include launch overhead: about 10 us per launch on our
  H200, docs/hardware.md) and are always recorded as ``event_ms``.
- CPU: ``time.perf_counter`` around the call.

Statistics are named for what they are (median, IQR = p75 - p25, min, mean) and computed
from the kept samples (torch.utils.benchmark / nvbench practice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

FLUSH_RANGE = "solbench::l2_flush"
END_RANGE = "solbench::call_end"
#: the worker's copy of returned outputs into the parent's buffers (after the end marker)
COPY_RANGE = "solbench::copy_out"


def percentile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty sample."""
    s = sorted(xs)
    if not s:
        return math.nan
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return s[lo]
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def stats(samples_ms: Sequence[float]) -> dict[str, float]:
    """median, IQR, min, mean (ms) of ``samples_ms``; NaN for an empty sample."""
    xs = [x for x in samples_ms if x is not None and math.isfinite(x)]
    if not xs:
        return {"median_ms": math.nan, "iqr_ms": math.nan, "min_ms": math.nan, "mean_ms": math.nan}
    return {
        "median_ms": percentile(xs, 50),
        "iqr_ms": percentile(xs, 75) - percentile(xs, 25),
        "min_ms": min(xs),
        "mean_ms": sum(xs) / len(xs),
    }


@dataclass
class DeviceActivity:
    """One device activity record (times in ns on the profiler clock)."""

    name: str
    start_ns: int
    end_ns: int
    stream: int = 0
    kind: str = "kernel"  # kernel | memcpy | memset


@dataclass
class Segmentation:
    """Per-iteration device figures. ``ok`` False means the flushes could not be matched
    and the caller must fall back to events (``reason`` says why)."""

    ok: bool
    span_ms: list[float] = field(default_factory=list)
    kernel_sum_ms: list[float] = field(default_factory=list)
    n_activities: list[int] = field(default_factory=list)
    kernel_sets: list[tuple[str, ...]] = field(default_factory=list)
    reason: str = ""
    #: per iteration: device time (ms) of activities after the end marker that are neither
    #: the harness's copy-out nor its flush (work a hook of the candidate's ran after the
    #: clock); None when not computed
    late_ms: list[float] | None = None
    late_all_ms: list[float] | None = None


def segment(flushes: list[DeviceActivity], activities: list[DeviceActivity],
            n_iters: int, ends: list[DeviceActivity] | None = None) -> Segmentation:
    """Split ``activities`` into ``n_iters`` iterations.

    ``flushes`` must hold n_iters + 1 records (one before each iteration and a closing one).
    With ``ends`` (n_iters end markers), iteration i takes every activity that starts at or
    after the end of flush i and before the start of end marker i; without, before the start
    of flush i+1.
    """
    fl = sorted(flushes, key=lambda a: a.start_ns)
    if len(fl) != n_iters + 1:
        return Segmentation(False, reason=f"found {len(fl)} flush kernels, expected {n_iters + 1}")
    en = sorted(ends, key=lambda a: a.start_ns) if ends else None
    if en is not None and len(en) != n_iters:
        return Segmentation(False, reason=f"found {len(en)} end markers, expected {n_iters}")
    acts = sorted(activities, key=lambda a: a.start_ns)
    out = Segmentation(True)
    j = 0
    for i in range(n_iters):
        lo = fl[i].end_ns
        hi = en[i].start_ns if en is not None else fl[i + 1].start_ns
        while j < len(acts) and acts[j].start_ns < lo:
            j += 1
        k = j
        win: list[DeviceActivity] = []
        while k < len(acts) and acts[k].start_ns < hi:
            win.append(acts[k])
            k += 1
        while k < len(acts) and acts[k].start_ns < fl[i + 1].start_ns:
            k += 1  # harness work after the end marker (output copies): not timed
        j = k
        if win:
            span = (max(a.end_ns for a in win) - min(a.start_ns for a in win)) / 1e6
            ksum = sum(a.end_ns - a.start_ns for a in win if a.kind == "kernel") / 1e6
        else:
            span, ksum = 0.0, 0.0
        out.span_ms.append(span)
        out.kernel_sum_ms.append(ksum)
        out.n_activities.append(len(win))
        out.kernel_sets.append(tuple(sorted(a.name for a in win)))
    return out


def late_activity(flushes: list[DeviceActivity], ends: list[DeviceActivity],
                  activities: list[DeviceActivity], harness_ids: set[int] | None = None,
                  ) -> list[float]:
    """Per iteration i, the summed duration (ms) of ``activities`` that start at or after end
    marker i and before flush i+1, skipping those whose ``id()`` is in ``harness_ids`` (the
    harness's own copy-out kernels). ``flushes`` holds n+1 records, ``ends`` n."""
    fl = sorted(flushes, key=lambda a: a.start_ns)
    en = sorted(ends, key=lambda a: a.start_ns)
    harness_ids = harness_ids or set()
    out = []
    for i, e in enumerate(en):
        hi = fl[i + 1].start_ns if i + 1 < len(fl) else float("inf")
        out.append(sum(a.end_ns - a.start_ns for a in activities
                       if e.start_ns <= a.start_ns < hi and id(a) not in harness_ids) / 1e6)
    return out


def kernel_set_consistency(sets: list[tuple[str, ...]]) -> dict[str, Any]:
    """How many iterations launched a different multiset of kernels than the most common one."""
    if not sets:
        return {"mode_count": 0, "inconsistent": 0, "distinct": 0}
    counts: dict[tuple[str, ...], int] = {}
    for s in sets:
        counts[s] = counts.get(s, 0) + 1
    mode = max(counts, key=counts.get)
    bad = [i for i, s in enumerate(sets) if s != mode]
    return {
        "mode_count": counts[mode],
        "inconsistent": len(bad),
        "inconsistent_iters": bad[:20],
        "distinct": len(counts),
        "mode_kernels": list(mode)[:20],
        "empty_iters": [i for i, s in enumerate(sets) if not s][:20],
    }


def is_harness_activity(name: str, kind: str) -> bool:
    """Whether a device activity launched inside one of the harness's own ranges (cache
    flush, end marker, copy-out) is one the harness itself launches there: a memcpy or memset,
    or one of PyTorch's own fill / copy kernels (``void at::native::...FillFunctor...``,
    ``...direct_copy_kernel_cuda...``; names as CUPTI reports them on the H200, torch 2.11,
    bench/results/profile_*.json). Anything else in those ranges was launched by a hook of the
    candidate's (a gc callback, a dispatcher override, a finalizer) and is the candidate's
    work: it must be timed, not taken for the harness's. A Triton kernel cannot carry such a
    name (``::`` is not a Python identifier)."""
    if kind in ("memcpy", "memset"):
        return True
    return name.startswith("void at::native::") and ("FillFunctor" in name or "copy_kernel" in name)


def kineto_segmentation(prof, n_iters: int) -> tuple[Segmentation, list[DeviceActivity]]:
    """Extract marker and candidate device activities from a finished ``torch.profiler``
    session and segment them. Marker kernels (flush, end) are the device events launched from
    within the ``solbench::l2_flush`` / ``solbench::call_end`` ranges, found through the GPU
    user annotation of the range when present, else through correlation ids of the CPU ops
    inside the range."""
    from torch.autograd import DeviceType

    res = prof.profiler.kineto_results
    dev, cpu_ranges, cpu_ops = [], {FLUSH_RANGE: [], END_RANGE: [], COPY_RANGE: []}, []
    gpu_annot = {FLUSH_RANGE: [], END_RANGE: [], COPY_RANGE: []}
    for e in res.events():
        dt = e.device_type()
        name = e.name()
        if dt == DeviceType.CUDA:
            if e.is_user_annotation():
                if name in gpu_annot:
                    gpu_annot[name].append((e.start_ns(), e.end_ns()))
                continue
            kind = "memcpy" if name.startswith("Memcpy") else "memset" if name.startswith("Memset") else "kernel"
            dev.append((e, DeviceActivity(name, e.start_ns(), e.end_ns(), e.device_resource_id(), kind)))
        elif dt == DeviceType.CPU:
            if name in cpu_ranges:
                cpu_ranges[name].append((e.start_ns(), e.end_ns()))
            else:
                cpu_ops.append(e)

    def markers(rng: str, expect: int) -> set[int]:
        ids: set[int] = set()
        windows = gpu_annot[rng]
        if windows:
            for e, a in dev:
                if any(lo <= a.start_ns and a.end_ns <= hi for lo, hi in windows):
                    ids.add(id(e))
        if len(_merge_close([a for e, a in dev if id(e) in ids])) != expect and cpu_ranges[rng]:
            ids = set()
            corr = {op.correlation_id() for op in cpu_ops
                    if any(lo <= op.start_ns() <= hi for lo, hi in cpu_ranges[rng])}
            for e, a in dev:
                if e.linked_correlation_id() in corr or e.correlation_id() in corr:
                    ids.add(id(e))
        return ids

    ours = {id(e) for e, a in dev if is_harness_activity(a.name, a.kind)}
    flush_ids = markers(FLUSH_RANGE, n_iters + 1) & ours
    end_ids = markers(END_RANGE, n_iters) & ours
    flushes = _merge_close([a for e, a in dev if id(e) in flush_ids])
    ends = _merge_close([a for e, a in dev if id(e) in end_ids])
    others = [a for e, a in dev if id(e) not in flush_ids and id(e) not in end_ids]
    seg = segment(flushes, others, n_iters, ends if len(ends) == n_iters else None)
    if seg.ok and len(ends) != n_iters:
        seg.reason = f"end markers not found ({len(ends)}); windows end at the next flush"
    if seg.ok and len(ends) == n_iters:
        try:  # evidence only: never let it cost the timing itself
            copy_ids: set[int] = set()
            corr = {op.correlation_id() for op in cpu_ops
                    if any(lo <= op.start_ns() <= hi for lo, hi in cpu_ranges[COPY_RANGE])}
            win = gpu_annot[COPY_RANGE]
            for e, a in dev:
                if (e.linked_correlation_id() in corr or e.correlation_id() in corr
                        or any(lo <= a.start_ns and a.end_ns <= hi for lo, hi in win)):
                    copy_ids.add(id(a))
            # late_ms: work after the end marker outside the copy-out range (the verdict's
            # basis, validated on the H200); late_all_ms also counts work inside that range
            # that is not one of PyTorch's copy/fill kernels or a memcpy/memset (timed, with
            # an advisory finding, until a device run confirms the names)
            seg.late_ms = late_activity(flushes, ends, others, copy_ids)
            seg.late_all_ms = late_activity(flushes, ends, others,
                                            {id(a) for e, a in dev if id(a) in copy_ids and id(e) in ours})
        except Exception:  # noqa: BLE001
            seg.late_ms = None
    return seg, others


#: how a timed profiler session finds the harness's markers (``EvalConfig.cupti_markers``):
#: "ranges" (CPU and CUDA activity; flush, end marker and copy-out found through their
#: record_function ranges: :func:`kineto_segmentation`) or "streams" (CUDA activity only; the
#: flush and end marker run on a marker stream of the worker's own, the copy-out on a copy
#: stream of its own: :func:`stream_segmentation`)
MARKER_METHODS = ("ranges", "streams")


def stream_segmentation(acts: list[DeviceActivity], n_iters: int, marker_stream: int,
                        copy_stream: int | None) -> tuple[Segmentation, list[DeviceActivity]]:
    """Segment a CUDA-only session by streams (no CPU activity recorded, so no ranges).

    ``acts``: every device activity of the session (``stream`` = CUPTI's stream id, times in
    ns); ``marker_stream`` / ``copy_stream``: the CUPTI stream ids of the worker's own marker
    and copy-out streams (created with the driver, never handed to the candidate). On the
    marker stream the worker launches only fills, in the order flush 0, end 0, flush 1, ...,
    end n-1, closing flush: exactly 2n + 1 of them, alternating, each end marker (one
    element) shorter than the flushes either side of it (2x L2 bytes each). Anything else
    there (a kernel not of PyTorch's fill/copy family, a count or an order that differs) is
    not the harness's sequence, and the segmentation fails (the caller falls back to CUDA
    events, as for ranges that do not match). Activities on the copy stream after an end
    marker are the harness's copy-out (excluded from ``late_ms``; those not of PyTorch's
    copy/fill family stay in ``late_all_ms``); on every other stream after an end marker they
    are late work, as with ranges. Returns (segmentation, the activities off the marker
    stream)."""
    mk = [a for a in acts if a.stream == marker_stream]
    others = [a for a in acts if a.stream != marker_stream]
    foreign = [a for a in mk if not is_harness_activity(a.name, a.kind)]
    if foreign:
        return Segmentation(False, reason=f"{len(foreign)} device activit(ies) not the harness's on its marker "
                                          f"stream (first: {foreign[0].name[:80]})"), others
    mk = _merge_close(mk)
    if len(mk) != 2 * n_iters + 1:
        return Segmentation(False, reason=f"found {len(mk)} fills on the marker stream, expected "
                                          f"{2 * n_iters + 1} (n flushes + n end markers + the closing flush)"), others
    flushes, ends = mk[0::2], mk[1::2]
    dur = [a.end_ns - a.start_ns for a in mk]
    for i in range(n_iters):
        if not dur[2 * i + 1] < min(dur[2 * i], dur[2 * i + 2]):
            return Segmentation(False, reason=f"marker {2 * i + 1} on the marker stream ({dur[2 * i + 1]} ns) is not "
                                              "shorter than the flushes beside it: not an end marker"), others
    seg = segment(flushes, others, n_iters, ends)
    if seg.ok:
        if copy_stream is None:
            seg.reason = "copy stream unknown: device work after the clock not judged"
        else:
            copy_ids = {id(a) for a in others if a.stream == copy_stream}
            seg.late_ms = late_activity(flushes, ends, others, copy_ids)
            seg.late_all_ms = late_activity(flushes, ends, others,
                                            {id(a) for a in others if a.stream == copy_stream
                                             and is_harness_activity(a.name, a.kind)})
    return seg, others


def kineto_stream_segmentation(prof, n_iters: int, marker_stream: int,
                               copy_stream: int | None) -> tuple[Segmentation, list[DeviceActivity]]:
    """:func:`stream_segmentation` of a finished CUDA-only ``torch.profiler`` session (every
    CUDA device activity that is not a user annotation)."""
    from torch.autograd import DeviceType

    acts = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != DeviceType.CUDA or e.is_user_annotation():
            continue
        name = e.name()
        kind = "memcpy" if name.startswith("Memcpy") else "memset" if name.startswith("Memset") else "kernel"
        acts.append(DeviceActivity(name, e.start_ns(), e.end_ns(), e.device_resource_id(), kind))
    return stream_segmentation(acts, n_iters, marker_stream, copy_stream)


def _merge_close(fl: list[DeviceActivity]) -> list[DeviceActivity]:
    fl = sorted(fl, key=lambda a: a.start_ns)
    out: list[DeviceActivity] = []
    for a in fl:
        if out and a.start_ns - out[-1].end_ns < 2_000:  # same flush split in pieces (<2 us gap)
            out[-1] = DeviceActivity(out[-1].name, out[-1].start_ns, max(out[-1].end_ns, a.end_ns))
        else:
            out.append(a)
    return out
