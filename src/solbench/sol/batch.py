"""Bounds of every workload of a problem, both models from one count (the CLI and benches).

One process serves many problems: the reference is counted once per workload (counting does
not depend on hardware or model) and priced with both models; the chosen one is T_SOL. The
workloads of a problem are counted together (:func:`problem_counts`).
"""

from __future__ import annotations

from typing import Any

from .bound import bound_from_counts
from .counting import FILLED_NOTE, CountingError, count_workload
from .hwspec import HardwareSpec, load_hardware

MODELS = ("refined", "solar")


def problem_counts(problem, workloads=None, cache=None) -> list:
    """The counted work of each of ``workloads`` (default: all) of ``problem``, in order: a
    :class:`Counts`, or the :class:`CountingError` of a workload that could not be counted.

    One problem's workloads share a reference: once the FakeTensor run of one has failed and
    real tensors counted it (a reference that reads values), the later ones go from a failed
    meta run straight to real tensors (:func:`count_workload`'s ``fake_failed``); once a lazy
    real run has met a read of unfilled values, the later ones fill at once (``lazy_fill``).
    ``cache``: a :class:`solbench.sol.cache.CountsCache` to read counts from and store new
    ones in (failures are not stored).
    """
    chosen = workloads if workloads is not None else problem.workloads
    out: list = []
    fake_failed = None
    lazy_fill = True
    for w in chosen:
        c = cache.get(problem, w) if cache is not None else None
        if c is None:
            try:
                c = count_workload(problem, w, fake_failed=fake_failed, lazy_fill=lazy_fill)
            except CountingError as e:
                out.append(e)
                continue
            if cache is not None:
                cache.put(problem, w, c)
        if c.real_tensors and c.fake_error and fake_failed is None:
            fake_failed = c.fake_error
        if any(n.startswith(FILLED_NOTE) for n in c.notes):
            lazy_fill = False  # this reference reads what its matmuls compute: fill them at once
        out.append(c)
    return out


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
        try:
            counts = count_workload(problem, workload)
        except CountingError as e:
            counts = e
    if isinstance(counts, CountingError):
        return {"uuid": workload.uuid, "axes": workload.axes, "sol_ms": None, "bottleneck": None,
                "error": str(counts)}
    allow_tf32 = bool(getattr(problem.definition, "allow_tf32", False))
    both = {m: bound_from_counts(counts, hw, m, allow_tf32=allow_tf32, workload_uuid=workload.uuid,
                                 axes=workload.axes) for m in MODELS}
    b = both[model]
    d = b.to_json()
    d.pop("workload_uuid")
    return {"uuid": workload.uuid, **d, "t_sol_model": model,
            "sol_ms_by_model": {m: x.sol_ms for m, x in both.items()},
            "hardware_by_model": {m: x.hardware for m, x in both.items()},
            "bytes": {"fused": b.bytes_fused, "unfused": b.bytes_unfused, "model": b.bytes_model,
                      "outputs_certain": counts.bytes_outputs_certain}}


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
    # rows carry the workload's index in the problem's file (the CLI's selection names it)
    rows = [{"index": problem.workloads.index(w), **workload_row(problem, w, hw, model, counts=c)}
            for w, c in zip(chosen, problem_counts(problem, chosen, cache))]
    used = next((r["hardware"] for r in rows if r.get("hardware")), hw.id)
    return {"problem": problem.name, "hardware": used, "hardware_requested": hw.id,
            "hardware_kind": load_hardware(used).kind, "model": model, "workloads": rows}
