"""Precision-downgrade finding from evidence (pure: figures in, a finding or None out).

A candidate downgrades precision when it computes the declared work in a lower precision than
the problem allows (TF32 or bf16 tensor cores for an fp32 matmul, fp16 accumulation, ...).
Changing a backend flag is not, by itself, evidence: the flag may touch no op the candidate
runs (an FFT kernel that set ``allow_tf32``), and a change toward higher precision (allow_tf32
off, matmul precision "highest") can never downgrade anything. The finding therefore rests on:

1. **Output error** (``output_error``): the candidate's error against an fp64 truth (relative
   L2) is well beyond the declared-precision reference's own error against the same truth:
   ``e_cand > max(factor * e_ref, floor)``, ``factor`` 16 by default, ``floor``
   :func:`error_floor`: ``2^10 * eps`` of the output dtype (fp32: 1.2e-4; fp64: 2.3e-13), or
   ``4 * 2^-11`` (4x TF32's unit roundoff, 2.0e-3) for fp32 work whose definition allows
   TF32. 16x covers an honest kernel's other summation order (a few times e_ref); the floor
   covers an honest fp32 kernel that sums sequentially (about sqrt(n) * 2^-24: 6e-5 at
   n = 10^6) while the reference sums pairwise; TF32 for an fp32 GEMM measures about 4e-4
   (inputs rounded to 2^-11, independent of K), bf16 about 2e-3.
2. **Kernels** (``kernels``): for fp32 work, device kernels whose names (CUPTI / profiler
   activity names) say they run reduced precision (:data:`REDUCED_KERNEL`: tf32, bf16, f16,
   fp16, half, hmma, the cuBLAS h/s tensor-op tile codes, fp8 e4m3/e5m2) of a kind the
   reference's own kernels do not use (cuDNN runs fp32 convolutions as TF32 by default, and
   then the reference does too) and the definition does not allow (TF32 when
   ``allow_tf32``).
3. **Flags** (``flags``): backend flags changed toward lower precision
   (:func:`solbench.harness.guards.precision_flag_changes`), leaving out, when the definition
   allows TF32, the changes that only reach TF32 (``allow_tf32`` on, precision "high" /
   "tf32"). Alone: advisory.

4. **Output dtype** (``output_dtype``, :func:`lower_dtype_fingerprint`): nearly every element of
   a float32/float64 output is exactly representable in a 16-bit or 8-bit float type while the
   reference's output on the same inputs is not: the values went through that type (a cast
   back to fp32 after bf16 or fp16 work keeps its rounding). For an honest fp32 value of
   random data the chance of being representable in bf16 is 2^-16, so the rule wants 99% of
   at least 64 finite nonzero elements, and at most half of the reference's.

5. **Input rounding** (``input_rounding``, :func:`input_rounding_evidence`): the output is the
   fp64 result of its inputs rounded to bf16, TF32 or fp16, its error against that at most
   1/16 of its error against the truth of the inputs themselves: what a backend flag lowered
   only for the length of the call leaves (measured on this repository's CPU host, a Xeon
   with AMX: ``set_float32_matmul_precision("medium")`` runs a 1024^3 fp32 matmul on bf16
   inputs in 12.8 ms against 28.0 ms, error 2.35e-3 against the truth and 8e-8 against the
   bf16-rounded truth). A wrong constant keeps its error whatever the inputs' rounding.

Severity: ``"hack"`` needs evidence of the act: kernels, lowered flags, the output dtype or
the input rounding, each beside an output error beyond the reference's (kernels alone suffice); ``"incorrect"``
for an output error beyond the reference's with no such evidence (a wrong constant, a
careless formula: a plain numerical error, check ``precision_error``); ``"advisory"`` with
lowered or unrankable flags only; no finding otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch

from .correctness import dtype_eps
from .guards import precision_flag_changes

#: kernel-name fragments of reduced-precision device kernels (case-insensitive). cuBLAS and
#: CUTLASS name tensor-op GEMMs by input type and instruction shape: ``tf32``, ``h16816gemm``,
#: ``s16816gemm`` (bf16/fp16 inputs, fp32 accumulate), ``s1688gemm`` (TF32, m16n8k8),
#: ``hmma``, ``h884``/``h1688``;
#: elementwise kernels carry the C++ type (``Half``, ``BFloat16``)
REDUCED_KERNEL = re.compile(
    r"tf32|bf16|bfloat16|f16|fp16|half|hmma|h884|h1688|h16816|s16816|s1688|e4m3|e5m2|fp8", re.I)
_KIND = (("tf32", re.compile(r"tf32|s1688", re.I)),
         ("fp8", re.compile(r"e4m3|e5m2|fp8", re.I)),
         ("16bit", re.compile(r"bf16|bfloat16|f16|fp16|half|hmma|h884|h1688|h16816|s16816", re.I)))

#: default output-error factor over the reference's own error
ERROR_FACTOR = 16.0


def error_floor(dtype: torch.dtype, allow_tf32: bool = False) -> float:
    """The smallest output error (relative L2 vs the fp64 truth) that counts as evidence of a
    downgrade, whatever the reference's own error (module doc, point 1)."""
    if allow_tf32 and dtype == torch.float32:
        return 4 * 2.0**-11
    return 2.0**10 * dtype_eps(dtype)


#: the lower float types whose values an fp32/fp64 output may be found to hold, fewest
#: mantissa bits first, so the type named is the narrowest the values fit (bf16 values of
#: moderate magnitude are fp16 values too)
LOWER_DTYPES = (torch.float8_e5m2, torch.float8_e4m3fn, torch.bfloat16, torch.float16)
#: at least this many finite nonzero elements, this share of them representable, and at most
#: ``FINGERPRINT_REF_MAX`` of the reference's, for :func:`lower_dtype_fingerprint`
FINGERPRINT_MIN_N, FINGERPRINT_SHARE, FINGERPRINT_REF_MAX = 64, 0.99, 0.5


def _representable(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    """Mask of the elements of ``x`` (float32/float64) whose value ``dt`` holds exactly."""
    with torch.no_grad():
        return x.to(dt).to(x.dtype) == x


def lower_dtype_fingerprint(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any] | None:
    """Evidence that ``out`` (a float32/float64 output) went through a lower float type: the
    first of :data:`LOWER_DTYPES` that represents at least 99% of its finite nonzero elements
    (at least 64 of them) exactly, while it represents at most half of the reference's
    ``ref`` (same shape; an honest output of integer-valued or input-copied data is
    representable when the reference's is too). Returns {"dtype", "share", "reference_share",
    "elements"} or None."""
    if not (isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor)) or out.shape != ref.shape \
            or out.dtype not in (torch.float32, torch.float64) or ref.dtype != out.dtype:
        return None
    with torch.no_grad():
        keep = torch.isfinite(out) & (out != 0)
        n = int(keep.sum().item())
        if n < FINGERPRINT_MIN_N:
            return None
        o = out[keep]
        rkeep = torch.isfinite(ref) & (ref != 0)
        r = ref[rkeep]
        for dt in LOWER_DTYPES:
            share = float(_representable(o, dt).float().mean().item())
            if share < FINGERPRINT_SHARE:
                continue
            rshare = float(_representable(r, dt).float().mean().item()) if r.numel() else 1.0
            if rshare <= FINGERPRINT_REF_MAX:
                return {"dtype": str(dt).replace("torch.", ""), "share": share, "reference_share": rshare,
                        "elements": n}
    return None


#: flush-to-zero evidence (:func:`flushed_denormals`): at least this many positions, and this
#: share of the positions where the reference holds a subnormal at least 2^10 times the
#: dtype's smallest (so far above it that an honest kernel's rounding keeps it nonzero)
FLUSH_MIN_N, FLUSH_SHARE, FLUSH_MARGIN = 16, 0.5, 2.0**10
#: ... or at least ``FLUSH_MIN_N`` positions, whatever their share, among those where the
#: reference and the truth hold a subnormal in the top three binades (at least 2^-3 times the
#: smallest normal: 2^-129 for float32, 20 significant bits): no honest path from there to an
#: exact zero exists short of an error of 2^20 ulps, while a flag set in only some of the
#: computing threads (some rows, some columns) zeroes every subnormal of its share of the work
FLUSH_TOP = 2.0**-3


def flushed_denormals(out: torch.Tensor, ref: torch.Tensor, truth: torch.Tensor | None = None) -> dict[str, Any] | None:
    """Evidence that ``out`` was computed with subnormals flushed to zero (FTZ/DAZ): it holds
    exact zeros where the declared-precision reference ``ref`` (same shape and float dtype)
    holds a nonzero subnormal of at least 2^10 times the dtype's smallest, at least 16 of
    them and half of such positions, or at least 16 of any share where the reference's
    subnormal is in the top three binades (:data:`FLUSH_TOP`: the flag set in only some of
    the threads that compute the output, or for some of its rows, stays under any share);
    where the fp64 ``truth`` is given, it must be at least
    that large there too (the reference is not the only witness). An honest kernel whose
    outputs are exact to the dtype keeps gradual underflow and never matches; a reference that
    flushes itself (some platforms' vector exp) gives no position to judge. The flag is per
    thread and cannot be read from outside: the outputs show it. An output with NaN or Inf
    gives no evidence (its zeros may be x / inf). Returns {"flushed", "positions", "share",
    "top_flushed", "top_positions", "examples": [(index, reference value, truth value)]}
    or None."""
    if not (isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor)) or out.shape != ref.shape \
            or not ref.is_floating_point() or out.dtype != ref.dtype or ref.dtype not in (
                torch.float16, torch.bfloat16, torch.float32, torch.float64):
        return None
    fi = torch.finfo(ref.dtype)
    smallest = fi.tiny * fi.eps  # the smallest subnormal: 2^-149 for float32
    with torch.no_grad():
        a = ref.detach().abs()
        solid = (a >= FLUSH_MARGIN * smallest) & (a < fi.tiny)
        if truth is not None and truth.shape == ref.shape:
            solid &= truth.detach().to(torch.float64).abs().to(ref.device) >= FLUSH_MARGIN * smallest
        n = int(solid.sum().item())
        if n < FLUSH_MIN_N or not bool(torch.isfinite(out).all().item()):
            # an output with NaN/Inf is broken numerically (a softmax without the max
            # subtraction: x / inf is 0 there too); its zeros are no evidence of a flag
            return None
        flushed = solid & (out.detach().to(ref.device) == 0)
        k = int(flushed.sum().item())
        top = solid & (a >= FLUSH_TOP * fi.tiny)
        k_top, n_top = int((flushed & top).sum().item()), int(top.sum().item())
        if k < FLUSH_MIN_N or (k < FLUSH_SHARE * n and k_top < FLUSH_MIN_N):
            return None
        idx = torch.nonzero(flushed.reshape(-1)).reshape(-1)[:5].tolist()
        flat_t = truth.reshape(-1) if truth is not None and truth.shape == ref.shape else None
        ex = [(i, float(ref.reshape(-1)[i]), float(flat_t[i]) if flat_t is not None else None) for i in idx]
    return {"flushed": k, "positions": n, "share": k / n, "top_flushed": k_top, "top_positions": n_top,
            "examples": ex}


#: the lower input precisions :func:`rounded_inputs` emulates, in the order tried: what a
#: backend flag scoped to the call runs fp32 work on (oneDNN's bf16 for
#: ``set_float32_matmul_precision("medium")`` on AMX / AVX512-BF16 CPUs; TF32 on NVIDIA
#: tensor cores: 10 mantissa bits), then fp16
INPUT_ROUNDINGS = ("bfloat16", "tf32", "float16")
#: the candidate's error against the fp64 truth of its inputs rounded so must be at most this
#: share of its error against the truth of the inputs themselves
ROUNDED_SHARE = 1.0 / 16


def rounded_inputs(x: torch.Tensor, kind: str) -> torch.Tensor:
    """``x`` (float32/float64) with every element rounded to the nearest ``kind`` value
    (:data:`INPUT_ROUNDINGS`; TF32: the float32 value with its 13 low mantissa bits rounded
    off, ties away from zero), in ``x``'s dtype."""
    if kind == "tf32":
        f = x.to(torch.float32).contiguous().view(torch.int32)
        r = ((f + (1 << 12)) & ~((1 << 13) - 1)).view(torch.float32)
        return torch.where(torch.isfinite(x), r.to(x.dtype), x)
    return x.to(getattr(torch, kind)).to(x.dtype)


def input_rounding_evidence(candidate_error: float, rounded_errors: dict[str, float]) -> dict[str, Any] | None:
    """Evidence that a fp32 output's error against the fp64 truth is the rounding of its
    inputs to a lower precision (the act, where no flag or kernel name shows it: a backend
    flag lowered only for the length of the call): the first of ``rounded_errors`` (kind ->
    the output's error against the fp64 reference run on the inputs rounded to that kind)
    at most :data:`ROUNDED_SHARE` of ``candidate_error``. A wrong constant or formula keeps
    its error against any rounding of the inputs and gives none. Returns {"inputs_rounded_to",
    "error_vs_rounded_truth", "error_vs_truth"} or None."""
    for kind, e in rounded_errors.items():
        if e == e and e <= ROUNDED_SHARE * candidate_error:  # e == e: not NaN
            return {"inputs_rounded_to": kind, "error_vs_rounded_truth": e, "error_vs_truth": candidate_error}
    return None


def _tf32_only(change: dict[str, Any]) -> bool:
    """A lowered flag change that reaches no lower than TF32."""
    return change["flag"].endswith("allow_tf32") or change["after"] in ("high", "tf32")


@dataclass(frozen=True)
class PrecisionFinding:
    """``severity``: "hack" or "advisory"; ``basis``: the evidence kinds present, of
    ("output_error", "kernels", "flags"); ``message``: one line; ``evidence``: the figures."""

    severity: str
    basis: tuple[str, ...]
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


def kernel_kinds(name: str) -> set[str]:
    """Reduced-precision kinds ("tf32", "16bit", "fp8") one kernel name shows; empty for
    none. A tf32 name counts only as tf32 (``..._tf32f32_f32`` has no 16-bit data)."""
    kinds = {k for k, rx in _KIND if rx.search(name)}
    if "tf32" in kinds:
        kinds.discard("16bit")
    return kinds


def reduced_precision_kernels(names: Iterable[str]) -> dict[str, set[str]]:
    """name -> kinds for the kernel names that show reduced precision."""
    out = {}
    for n in names:
        k = kernel_kinds(n)
        if k:
            out[n] = k
    return out


def is_fp32_work(input_dtypes: Iterable[torch.dtype], output_dtypes: Iterable[torch.dtype]) -> bool:
    """True when every floating input and output is float32 or float64 (and there is one):
    the declared work is full precision, so reduced-precision kernels downgrade it."""
    fl = [d for d in list(input_dtypes) + list(output_dtypes)
          if d.is_floating_point or d == torch.float4_e2m1fn_x2]
    return bool(fl) and all(d in (torch.float32, torch.float64) for d in fl)


def precision_finding(
    *,
    flags_before: dict[str, Any],
    flags_after: dict[str, Any],
    fp32_work: bool,
    allow_tf32: bool = False,
    dtype: torch.dtype = torch.float32,
    candidate_error: float | None = None,
    reference_error: float | None = None,
    candidate_kernels: Sequence[str] = (),
    reference_kernels: Sequence[str] = (),
    error_factor: float = ERROR_FACTOR,
    output_dtype: dict[str, Any] | None = None,
) -> PrecisionFinding | None:
    """Decide a precision-downgrade finding (module doc).

    Args:
        flags_before / flags_after: :func:`solbench.harness.guards.backend_flags` readings
            before the candidate ran and after.
        fp32_work: the declared work is fp32 (:func:`is_fp32_work` of the definition's dtypes).
        allow_tf32: the definition allows TF32 for fp32 work (``Definition.allow_tf32``).
        dtype: the output dtype the errors are measured in (its epsilon sets the floor).
        candidate_error / reference_error: relative L2 error against an fp64 truth of the
            candidate's output and of the declared-precision reference's (None: unknown, no
            output evidence).
        candidate_kernels / reference_kernels: device kernel names that ran in the
            candidate's / the reference's timed or checked calls.
        error_factor: how far beyond the reference's error counts as evidence.
        output_dtype: :func:`lower_dtype_fingerprint` of the output the errors are of (None:
            no such evidence).

    Returns:
        A :class:`PrecisionFinding`, or None when there is nothing to report.
    """
    changes = precision_flag_changes(flags_before, flags_after)
    lowered = [c for c in changes if c["direction"] in ("lower", "unknown")
               and not (allow_tf32 and c["direction"] == "lower" and _tf32_only(c))]
    basis: list[str] = []
    evidence: dict[str, Any] = {"flag_changes": changes}
    parts: list[str] = []

    if candidate_error is not None and reference_error is not None:
        limit = max(error_factor * reference_error, error_floor(dtype, allow_tf32))
        evidence.update(candidate_error=candidate_error, reference_error=reference_error,
                        error_limit=limit)
        if candidate_error > limit:
            basis.append("output_error")
            parts.append(f"error vs the fp64 truth {candidate_error:.3g} > {limit:.3g} "
                         f"(the reference's {reference_error:.3g})")

    if fp32_work:
        ref_kinds = set().union(*reduced_precision_kernels(reference_kernels).values()) \
            if reference_kernels else set()
        allowed = ref_kinds | ({"tf32"} if allow_tf32 else set())
        bad = {n: sorted(k - allowed) for n, k in reduced_precision_kernels(candidate_kernels).items()
               if k - allowed}
        if bad:
            basis.append("kernels")
            evidence["reduced_kernels"] = dict(list(bad.items())[:8])
            kinds = sorted(set().union(*map(set, bad.values())))
            parts.append(f"{len(bad)} reduced-precision kernel(s) ({', '.join(kinds)}) for fp32 "
                         f"work, e.g. {next(iter(bad))[:80]!r}")

    flag_text = ", ".join(f"{c['flag']}: {c['before']} -> {c['after']}" for c in lowered)
    if "output_error" in basis and output_dtype is not None:
        basis.append("output_dtype")
        evidence["output_dtype"] = output_dtype
        parts.append(f"{output_dtype['share']:.1%} of the output's values are {output_dtype['dtype']} values "
                     f"(the reference's: {output_dtype['reference_share']:.1%})")
    if basis:
        if lowered:
            basis.append("flags")
            parts.append(f"flags lowered: {flag_text}")
        if basis == ["output_error"]:
            # an error alone is no evidence of the act: a wrong constant makes it too
            return PrecisionFinding("incorrect", tuple(basis), "error beyond the declared precision: "
                                    + "; ".join(parts), evidence)
        return PrecisionFinding("hack", tuple(basis), "precision downgrade: " + "; ".join(parts), evidence)
    if lowered:
        return PrecisionFinding(
            "advisory", ("flags",),
            f"backend precision flags lowered ({flag_text}) with no reduced-precision kernel or "
            f"output error beyond the reference's", evidence)
    return None
