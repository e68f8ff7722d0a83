"""Bounds of every workload of a problem, both models from one count (the CLI and benches).

One process serves many problems: the reference is counted once per workload (counting does
not depend on hardware or model) and priced with both models; the chosen one is T_SOL. The
workloads of a problem are counted together (:func:`problem_counts`).
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any

from .bound import bound_from_counts
from .counts import FILLED_NOTE, MASKS_NOTE, CountingError
from .hwspec import HardwareSpec, load_hardware

MODELS = ("refined", "solar")


_FROZEN = False
#: full collections while a problem is counted: one per this many younger ones (Python's default 10)
FULL_COLLECTION_EVERY = 1000


@contextlib.contextmanager
def _rare_full_collections():
    """Full (generation 2) collections become rare while a problem is counted. A count keeps
    its layer graph and per-tensor records (weak references) alive to the end, hundreds of
    thousands of objects for a reference that loops over small ops, and each full collection
    scans every one of them again: up to a tenth of the CPU a count takes. The young
    generations are still collected as usual, so cyclic garbage that dies young (most of it) is
    freed as before; the default comes back once the problem is counted."""
    old = gc.get_threshold()
    gc.set_threshold(old[0], old[1], max(old[2], FULL_COLLECTION_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _freeze_heap_once() -> None:
    """Move what is alive now (torch and every import: about 220k objects) to the cyclic
    collector's permanent generation, once per process. A count allocates hundreds of
    thousands of objects (FlashInfer 012: a layer per torch call), which triggers full
    collections, and each would scan the whole import heap again (about 0.3 s of CPU per
    012 workload). Objects alive now are module-level state that lives as long as the process;
    nothing later is frozen, so the collector still frees every cycle a count leaves."""
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        gc.freeze()


#: glibc ``mallopt`` parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: blocks below this size come from (and go back to) the heap, never from their own mmap
HEAP_REUSE_BYTES = 1 << 30
_HEAP_SET: bool | None = None


def _reuse_freed_memory_once() -> bool:
    """Let glibc's malloc reuse freed memory for large blocks, once per process; True when set.

    By default a block of 32 MiB or more (the threshold grows dynamically from 128 KiB up to
    that) is mapped on its own and unmapped when freed, so the next tensor of that size is
    fresh memory again and pays a page fault per 4 KiB page when first written: a real-tensor
    count that makes tens of temporaries of 44 MB (the nvfp4 quantisers' comparisons and
    masks over a 4096 x 2688 fp32 weight) spent most of an ``abs`` (29 ms of 32 for 11M
    elements) in the kernel's page-fault path. With blocks up to HEAP_REUSE_BYTES taken from
    the heap and freed memory kept (trim threshold as high), a later tensor reuses pages
    already mapped: ``abs`` of that weight takes 4 ms. The process keeps its peak heap
    instead of returning it; addresses differ, values and counts do not (nothing counted
    depends on where a tensor lives). Only ``solbench sol``/bench processes call this
    (the evaluation pipeline counts through :func:`~solbench.sol.counting.count_workload`,
    whose process times candidates' inputs: its allocator is left as it is). No-op off glibc."""
    global _HEAP_SET
    if _HEAP_SET is None:
        _HEAP_SET = False
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
            mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
            mallopt.restype = ctypes.c_int
            _HEAP_SET = bool(mallopt(_M_MMAP_THRESHOLD, HEAP_REUSE_BYTES)) and \
                bool(mallopt(_M_TRIM_THRESHOLD, HEAP_REUSE_BYTES))
        except (OSError, AttributeError):  # not glibc (no mallopt): the default allocator
            _HEAP_SET = False
    return _HEAP_SET


def problem_counts(problem, workloads=None, cache=None) -> list:
    """The counted work of each of ``workloads`` (default: all) of ``problem``, in order: a
    :class:`Counts`, or the :class:`CountingError` of a workload that could not be counted.

    One problem's workloads share a reference: once the FakeTensor run of one has failed and
    real tensors counted it (a reference that reads values), the later ones go from a failed
    meta run straight to real tensors (:func:`count_workload`'s ``fake_failed``); once a lazy
    real run has met a read of unfilled values, the later ones fill at once (``lazy_fill``), and
    likewise for a read of a value derived from a skipped mask (``lazy_masks``).
    ``cache``: a :class:`solbench.sol.cache.CountsCache` to read counts from and store new
    ones in (failures are not stored).
    """
    return list(iter_problem_counts(problem, workloads, cache))


def iter_problem_counts(problem, workloads=None, cache=None):
    """:func:`problem_counts`, one workload at a time: a caller that prices each count as it
    comes holds one layer graph at a time, not the whole problem's (the cyclic collector scans
    every object alive, so a problem's worth of graphs makes each full collection costlier)."""
    _freeze_heap_once()
    _reuse_freed_memory_once()
    chosen = workloads if workloads is not None else problem.workloads
    with _rare_full_collections():
        yield from _counts(problem, chosen, cache)


def _counts(problem, chosen, cache):
    fake_failed = None
    lazy_fill = lazy_masks = True
    for w in chosen:
        c = cache.get(problem, w) if cache is not None else None
        if c is None:
            from .counting import count_workload  # torch: only for a workload the cache lacks

            try:
                c = count_workload(problem, w, fake_failed=fake_failed, lazy_fill=lazy_fill,
                                   lazy_masks=lazy_masks)
            except CountingError as e:
                yield e
                continue
            if cache is not None:
                try:
                    cache.put(problem, w, c)
                except OSError:
                    pass  # a cache that cannot be written is no cache: the count stands
        if c.real_tensors and c.fake_error and fake_failed is None:
            fake_failed = c.fake_error
        if any(n.startswith(FILLED_NOTE) for n in c.notes):
            lazy_fill = False  # this reference reads what its matmuls compute: fill them at once
        if any(n.startswith(MASKS_NOTE) for n in c.notes):
            lazy_masks = False  # it reads a value derived from a mask: compute them at once
        yield c


def workload_row(problem, workload, hw: HardwareSpec, model: str = "refined", *,
                 counts=None) -> dict[str, Any]:
    """One workload's row: the chosen model's bound fields (``SolBound`` JSON), both models'
    T_SOL (``sol_ms_by_model``) and which is T_SOL (``t_sol_model``), bytes, and the certain
    floor. A counting failure gives ``{"uuid", "axes", "sol_ms": None, "error"}``. ``counts``:
    the workload's :class:`Counts` (or :class:`CountingError`) when already counted.

    Raises:
        ValueError: unknown model.
    """
    if model not in MODELS:
        raise ValueError(f"unknown SOL model {model!r} (expected 'refined' or 'solar')")
    if counts is None:
        from .counting import count_workload

        try:
            counts = count_workload(problem, workload)
        except CountingError as e:
            counts = e
    if isinstance(counts, CountingError):
        return error_row(workload, str(counts))
    allow_tf32 = bool(getattr(problem.definition, "allow_tf32", False))
    both = {m: bound_from_counts(counts, hw, m, allow_tf32=allow_tf32, workload_uuid=workload.uuid,
                                 axes=workload.axes) for m in MODELS}
    return row_from_bounds(workload, both, model)


def error_row(workload, error: str) -> dict[str, Any]:
    """The row of a workload with no bound: ``{"uuid", "axes", "sol_ms": None, "bottleneck":
    None, "error"}``."""
    return {"uuid": workload.uuid, "axes": workload.axes, "sol_ms": None, "bottleneck": None,
            "error": error}


def row_from_bounds(workload, both: dict, model: str = "refined") -> dict[str, Any]:
    """A workload's row (:func:`workload_row`) from both models' :class:`SolBound`
    (``{"refined": ..., "solar": ...}``, e.g. as a counting child replied them); ``model`` is
    T_SOL's."""
    b = both[model]
    d = b.to_json()
    d.pop("workload_uuid")
    return {"uuid": workload.uuid, **d, "t_sol_model": model,
            "sol_ms_by_model": {m: x.sol_ms for m, x in both.items()},
            "hardware_by_model": {m: x.hardware for m, x in both.items()},
            "bytes": {"fused": b.bytes_fused, "unfused": b.bytes_unfused, "model": b.bytes_model,
                      "outputs_certain": b.bytes_outputs_certain}}


def problem_rows(problem, hardware: str | HardwareSpec, model: str = "refined",
                 workloads=None, cache=None) -> dict[str, Any]:
    """``{"problem", "hardware", "hardware_kind", "model", "workloads": [row, ...]}`` for
    ``workloads`` (default: all) of ``problem`` (see :func:`workload_row`); ``cache`` as in
    :func:`problem_counts`.

    Raises:
        HardwareError: unknown hardware. ValueError: unknown model.
    """
    hw = load_hardware(hardware)
    chosen = workloads if workloads is not None else problem.workloads
    rows = [workload_row(problem, w, hw, model, counts=c)
            for w, c in zip(chosen, iter_problem_counts(problem, chosen, cache))]
    return _problem_result(problem, hw, model, chosen, rows)


def cached_bounds(problem, workloads, hardware: str | HardwareSpec, cache) -> dict[str, dict]:
    """Both models' bounds (``{uuid: {"refined": SolBound, "solar": SolBound}}``) of those of
    ``workloads`` whose counts ``cache`` (a :class:`~solbench.sol.cache.CountsCache`, or None)
    holds, priced here: no counting child is needed for them. The others are left out."""
    if cache is None:
        return {}
    from .bound import bound

    hardware = load_hardware(hardware)  # once: each workload's two bounds price on this spec
    out: dict[str, dict] = {}
    for w in workloads:
        c = cache.get(problem, w)
        if c is None:
            continue
        try:
            out[w.uuid] = {m: bound(problem, w, hardware=hardware, model=m, counts=c) for m in MODELS}
        except Exception:  # noqa: BLE001 - left to the counting child, which reports the error
            pass
    return out


def problem_rows_isolated(child, item: int, problem, hardware: str | HardwareSpec, model: str = "refined",
                          workloads=None, cache=None) -> dict[str, Any]:
    """:func:`problem_rows`, counted by ``child`` (a :class:`~solbench.sol.isolated.CountingChild`
    pricing on ``hardware``): a reference that crashes or hangs the count costs the workload it
    was counting an error row, and the rest go on. ``item`` names the problem in the child's
    replies. ``cache``: a :class:`~solbench.sol.cache.CountsCache` read here first; only the
    workloads it misses go to the child (which is not started when none do).

    Raises:
        HardwareError: unknown hardware. ValueError: unknown model.
    """
    if model not in MODELS:
        raise ValueError(f"unknown SOL model {model!r} (expected 'refined' or 'solar')")
    hw = load_hardware(hardware)
    chosen = list(workloads if workloads is not None else problem.workloads)
    got = cached_bounds(problem, chosen, hardware, cache)
    missed = [w for w in chosen if w.uuid not in got]
    if missed:
        got.update(child.count(item, str(problem.path), missed))
    rows = [error_row(w, str(got[w.uuid])) if isinstance(got[w.uuid], Exception)
            else row_from_bounds(w, got[w.uuid], model) for w in chosen]
    return _problem_result(problem, hw, model, chosen, rows)


def _problem_result(problem, hw: HardwareSpec, model: str, chosen, rows: list) -> dict[str, Any]:
    # rows carry the workload's index in the problem's file (the CLI's selection names it)
    rows = [{"index": problem.workloads.index(w), **r} for w, r in zip(chosen, rows)]
    used = next((r["hardware"] for r in rows if r.get("hardware")), hw.id)
    return {"problem": problem.name, "hardware": used, "hardware_requested": hw.id,
            "hardware_kind": load_hardware(used).kind, "model": model, "workloads": rows}
