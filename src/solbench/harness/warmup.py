"""The parent's own first-use costs on CUDA, paid while the first workers start.

With CUDA's lazy module loading (the default since CUDA 11.7) a kernel's module is loaded at
its first launch, a few milliseconds each. The parent launches dozens of distinct kernels to
make a workload's input sets (random fills, casts, index structures) and to compare outputs
(differences, maxima, sums, masks, the fp64 norms), so the first workload of a process paid
about 0.3-0.4 s of loading inside its correctness rounds and timed-output verification on an
H100 (``correctness.inputs`` 0.10-0.14 s against 0.007 s on the next workload,
``correctness.compare`` 0.14-0.22 s against 0.03 s; bench/results/device_s24_h100). Those
kernels do not depend on the candidate: :func:`warm_parent` launches them with throwaway
values while the parent waits for the candidate's worker (its interpreter, torch's import,
the CUDA context, the build), so the first verdict no longer waits for them.

Nothing here is evidence or touches a worker: the values are discarded, the seed is not the
evaluation's (its seeds stay secret and unused until the rounds), and the thread is joined
before the first workload's rounds start, so no launch of it overlaps anything timed.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import torch

#: largest input set (bytes) warmed; above it the problem's smallest workload under it is
#: warmed in its place (same definition: the same generators, casts and index structures, so
#: the same kernels to load), or none when there is none (a big allocation beside a starting
#: worker is not worth what it saves, and a set made on the CPU side of a generator, such as
#: an NVFP4 quantisation of 97 MB, takes seconds)
MAX_SET_BYTES = 64 << 20
#: no further input profile is warmed after this many seconds: the warm-up must end before
#: the worker is ready (about 1 s after the parent's torch import at best), or the first
#: workload waits for it
MAX_GENERATE_S = 0.5
#: elements of each output dtype's comparison warm-up
N_COMPARE = 4096
#: the throwaway seed of the warm-up's input sets (never one of an evaluation's)
WARM_SEED = 0x3A3A
#: devices this process has warmed: the loading is paid once per process, so a later
#: evaluation (the next problem of a run) adds nothing to its first workload's path
_warmed: set[str] = set()


def stand_in(problem, w):
    """The workload whose input sets are made to warm ``w``'s: ``w`` itself when its set is
    at most :data:`MAX_SET_BYTES`, else the problem's smallest workload under that, else None.
    CUDA loads a kernel's module at its first launch whatever the sizes, so a small workload
    of the same definition loads what the first one will launch. Without it a big first
    workload (L1/013's, 270 MB) warmed no generation and its rounds paid the loading: on an
    H100 ``correctness.inputs`` 0.074-0.112 s, against 0.008-0.011 s with the stand-in
    (alternated, bench/results/device_s27_h100)."""
    if problem.workload_bytes(w) <= MAX_SET_BYTES:
        return w
    small = problem.smallest_workloads(1, MAX_SET_BYTES)
    return small[0] if small else None


def _generate(problem, w, device: str) -> None:
    """The input sets of every distinct input profile of the round plan of the first
    workload, or of its stand-in (:func:`stand_in`)."""
    from ..inputs.rounds import round_plan

    w = stand_in(problem, w)
    if w is None:
        return
    t0 = time.perf_counter()
    seen: set[str] = set()
    for spec in round_plan(1, problem, w):
        if spec.profile in seen or time.perf_counter() - t0 > MAX_GENERATE_S:
            continue
        seen.add(spec.profile)
        spec.generate(problem, w, WARM_SEED, device, profile=spec.profile)


def _compare(problem, w, device: str) -> None:
    """:func:`~.correctness.check_outputs` on each declared output dtype: one passing and one
    failing comparison of poisoned outputs (the miss records too), and the fp64 norms."""
    from ..spec.dtypes import to_torch
    from .correctness import check_outputs, norm_max_error, poison_, rel_l2
    from .guards import tensor_digest

    defn = problem.definition
    dts = {to_torch(s.dtype) for s in defn.outputs.values()}
    tol = w.tolerance_or_default()
    g = torch.Generator(device=device).manual_seed(WARM_SEED)
    for dt in dts:
        if dt.is_floating_point and dt.itemsize >= 2:
            ref = torch.randn(N_COMPARE, device=device, generator=g).to(dt)
        elif dt == torch.bool:
            ref = torch.rand(N_COMPARE, device=device, generator=g) > 0.5
        else:
            try:
                ref = torch.randint(0, 100, (N_COMPARE,), device=device, generator=g).to(dt)
            except (RuntimeError, TypeError):  # a packed or fp8 dtype with no such cast
                continue
        bad = ref.clone()
        try:
            if dt.is_floating_point:
                bad[::7] = bad[::7] * 3 + 1
            else:
                bad[::7] = ~bad[::7] if dt == torch.bool else bad[::7] + 1
        except RuntimeError:
            continue
        poison_(torch.empty_like(ref))
        for out in (ref.clone(), bad):
            check_outputs([out], [ref], tol, poisoned=True, ref_errors=[1e-6], ref_max_errors=[1e-6])
        tensor_digest(ref)
    t = torch.randn(N_COMPARE, device=device, dtype=torch.float64, generator=g)
    rel_l2(t.float(), t)
    norm_max_error(t.float(), t)


def warm_parent(problem, w, device: str) -> dict[str, Any]:
    """Launch, on ``device`` (CUDA only), the parent's input generation for workload ``w`` of
    ``problem`` and its output comparison with throwaway values. Returns
    ``{"seconds": float, "error": str | None}``; never raises (a failure here only means the
    first workload pays the loading itself)."""
    t0 = time.perf_counter()
    errs = []
    for step in (lambda: _generate(problem, w, device), lambda: _compare(problem, w, device)):
        try:  # each on its own: inputs that cannot be made (a missing blob) leave the comparison
            step()
        except Exception as e:  # noqa: BLE001 - the rounds will report whatever is really wrong
            errs.append(f"{type(e).__name__}: {e}"[:200])
    if torch.device(device).type == "cuda":
        try:
            torch.cuda.synchronize(device)
        except Exception as e:  # noqa: BLE001
            errs.append(f"{type(e).__name__}: {e}"[:200])
    return {"seconds": round(time.perf_counter() - t0, 3), "error": "; ".join(errs) or None}


class ParentWarmup:
    """:func:`warm_parent` in a daemon thread, started before the candidate's worker is
    awaited and joined (:meth:`join`) before the first workload's rounds. Once per process
    and device; on a CPU device it does nothing (no lazy loading to pay)."""

    def __init__(self, problem, w, device: str):
        self.result: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None
        self._device = str(device)
        if not self._device.startswith("cuda") or self._device in _warmed:
            return
        _warmed.add(self._device)

        def body() -> None:
            self.result = warm_parent(problem, w, device)

        self._thread = threading.Thread(target=body, name="solbench-parent-warmup", daemon=True)
        self._thread.start()

    def join(self) -> dict[str, Any] | None:
        """Wait for the warm-up (it is short: tens of milliseconds after CUDA's start);
        returns its result, None when none ran."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            from .slots import release_cached

            release_cached(self._device)  # what its input sets freed, for the workers
        return self.result
