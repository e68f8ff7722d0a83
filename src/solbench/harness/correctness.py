"""Correctness checks of candidate outputs against reference outputs (pure functions).

Two layers, both reported:

1. **Upstream rule** (SOL-ExecBench compatibility; formats.md): both sides cast to float32
   (float64 for float64 and integer outputs, so large ids compare exactly);
   NaN/Inf anywhere fails (except positions where both are -inf under
   ``allow_negative_inf``); an element matches when ``|a-b| <= atol + rtol*|b|``; the output
   passes when matched/numel >= required_matched_ratio and ``max|a-b| <= max_error_cap`` (if
   set); an all-zero output against a non-zero reference fails.
2. **Scale-invariant checks** (solbench; threats.md principle 4), which an absolute tolerance
   cannot give: relative L2 error ``||a-b||_2 / ||b||_2``, max error normalised by ``max|b|``,
   the worst relative L2 over up to 64 slices of the leading dim (so a partial write is seen),
   and write coverage (elements still holding the poison bit pattern the harness pre-filled,
   where the reference differs from that pattern).

3. **Exact outputs** (solbench): integer and bool outputs must equal the reference element for
   element, whatever the float tolerance says (the float rule let an int64 top-k whose ids
   were off by one on 90.5% of selections pass). ``upstream_ok`` still reports what the float
   rule says; the exact check fails ``scale_ok`` with ``failed_check = "exact"``. An output
   may instead declare a set semantics (:class:`OutputSemantics`): ``"set"`` compares each
   row along the last dim as a set (any order); ``"topk"`` accepts any in-range, per-row
   unique indices whose gathered values from the source input equal, as a multiset, the
   values gathered by the reference's indices (so ties may pick other indices). Failure:
   ``failed_check = "index_set"``. :func:`infer_semantics` declares ``"topk"`` for the
   integer outputs of a reference that calls ``topk``.

Special values: a candidate NaN/Inf fails (``nan_inf``) unless the reference holds the same
special value there (NaN vs NaN, +inf vs +inf, -inf vs -inf); such a position is still no
match (it counts against ``required_matched_ratio``) except -inf vs -inf under
``allow_negative_inf``, upstream's one allowance. -inf vs +inf, or NaN/Inf against a finite
value, fails. -0.0 equals +0.0.

Limits of layer 2 (documented, one place): ``rel_l2 <= L`` and per-slice ``<= L`` with
``L = min(0.5, max(4*rtol, 4*eps(dtype), 8*e_ref))`` and normalised max error
``<= min(1.0, max(0.1, 8*rtol, 16*e_ref_max))``, where ``e_ref`` is the declared-precision
reference's own relative L2 error against an fp64 truth when the caller supplies it (so an
ill-conditioned output never fails an honest kernel), and ``eps`` is the output dtype's
machine epsilon. All-zeros gives rel_l2 = 1 and always fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..spec.trace import Status
from ..spec.workload import Tolerance

#: byte value the harness fills output buffers with before each call (0xFF: a NaN payload
#: for every float format, -1 for signed ints, True for bool)
POISON_BYTE = 0xFF

_EPS = {
    torch.float64: 2.0**-52, torch.float32: 2.0**-23, torch.float16: 2.0**-10,
    torch.bfloat16: 2.0**-7, torch.float8_e4m3fn: 2.0**-3, torch.float8_e5m2: 2.0**-2,
}


def dtype_eps(dtype: torch.dtype) -> float:
    """Machine epsilon of a float dtype (packed fp4: 0.5; ints/bool: 0)."""
    if dtype == torch.float4_e2m1fn_x2:
        return 0.5
    return _EPS.get(dtype, 0.0)


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` in place with the poison byte pattern (any dtype). Returns ``t``."""
    if t.numel():
        t.reshape(-1).view(torch.uint8).fill_(POISON_BYTE) if t.is_contiguous() else t.fill_(float("nan"))
    return t


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Integer view of the raw bits of ``t`` (same shape; fp4/fp8/bool by their bytes)."""
    size = t.element_size()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    return t.contiguous().view(view)


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when ``a`` and ``b`` have the same shape, dtype and raw bytes (any device; ``b``
    is moved to ``a``'s device). Used for input-mutation and stream-order checks."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    av = a.contiguous().reshape(-1).view(torch.uint8)  # reshape: 0-d tensors cannot be viewed as bytes
    bv = b.to(a.device).contiguous().reshape(-1).view(torch.uint8)
    return bool(torch.equal(av, bv))


def _poison_bits(dtype: torch.dtype) -> int:
    size = torch.empty((), dtype=dtype).element_size()
    val = int.from_bytes(bytes([POISON_BYTE]) * size, "little", signed=size > 1)
    return val


def _as_float(t: torch.Tensor) -> torch.Tensor:
    """float32 for float formats (upstream's cast); float64 for float64 and integer/bool
    outputs, so ids up to 2^53 compare exactly (float32 would blur ids above 2^24)."""
    if t.dtype == torch.float64 or not (t.dtype.is_floating_point or t.dtype == torch.float4_e2m1fn_x2):
        return t.to(torch.float64)
    if t.dtype == torch.float4_e2m1fn_x2:
        return unpack_fp4(t)
    return t.to(torch.float32)


_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def unpack_fp4(t: torch.Tensor) -> torch.Tensor:
    """Unpack ``float4_e2m1fn_x2`` [..., n] into float32 [..., 2n] (low nibble first)."""
    b = t.view(torch.uint8).to(torch.int64)
    lut = torch.tensor(_E2M1, dtype=torch.float32, device=t.device)
    lo, hi = lut[b & 0xF], lut[(b >> 4) & 0xF]
    return torch.stack([lo, hi], dim=-1).reshape(*t.shape[:-1], t.shape[-1] * 2)


@dataclass(frozen=True)
class OutputSemantics:
    """How an output compares beyond the elementwise rule.

    ``kind``: ``"exact"`` (default for integer/bool outputs), ``"set"`` (each row along the last
    dim is a set) or ``"topk"`` (indices into ``source``, an input name, along its last dim:
    valid when in range, unique per row, and the gathered values equal the reference's as a
    multiset per row)."""

    kind: str = "exact"
    source: str | None = None

    def __post_init__(self):
        if self.kind not in ("exact", "set", "topk"):
            raise ValueError(f"output semantics {self.kind!r}: expected exact, set or topk")
        if self.kind == "topk" and not self.source:
            raise ValueError("topk semantics needs the source input's name")


def is_exact_dtype(dtype: torch.dtype) -> bool:
    """Integer and bool dtypes (compared exactly); floats, fp8 and packed fp4 are not."""
    return not (dtype.is_floating_point or dtype == torch.float4_e2m1fn_x2 or dtype.is_complex)


_TOPK_CALL = __import__("re").compile(r"\btopk\b")


def infer_semantics(defn) -> dict[str, OutputSemantics]:
    """Set semantics the definition implies: when the reference calls ``topk``, every integer
    output whose declared shape equals a float input's declared shape except in the last dim
    gets ``"topk"`` with that input (the first such) as its source. Other outputs are absent
    (exact for integers/bool, the tolerance rule for floats).

    Args:
        defn: a :class:`solbench.spec.definition.Definition`.
    """
    from ..spec.dtypes import to_torch

    if not _TOPK_CALL.search(defn.reference or ""):
        return {}
    out: dict[str, OutputSemantics] = {}
    for oname, ospec in defn.outputs.items():
        if ospec.shape is None or not ospec.shape or not is_exact_dtype(to_torch(ospec.dtype)) \
                or to_torch(ospec.dtype) == torch.bool:
            continue
        for iname, ispec in defn.inputs.items():
            if ispec.shape and to_torch(ispec.dtype).is_floating_point \
                    and len(ispec.shape) == len(ospec.shape) \
                    and [str(d) for d in ispec.shape[:-1]] == [str(d) for d in ospec.shape[:-1]]:
                out[oname] = OutputSemantics("topk", iname)
                break
    return out


@dataclass
class OutputCheck:
    """Figures for one output. Errors are in the output's units (after cast to float)."""

    name: str
    shape_ok: bool = True
    dtype_ok: bool = True
    numel: int = 0
    has_nan: bool = False
    has_inf: bool = False
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    matched_ratio: float = 1.0
    rel_l2: float = 0.0
    norm_max_error: float = 0.0
    worst_slice_rel_l2: float = 0.0
    write_coverage: float = 1.0
    ref_norm: float = 0.0
    rel_l2_limit: float = 0.0
    norm_max_limit: float = 0.0
    upstream_ok: bool = True
    scale_ok: bool = True
    failed_check: str | None = None
    detail: str = ""
    #: a declared set semantics ("set", "topk") decides alone: ``upstream_ok`` then only
    #: records what the elementwise rule would have said
    semantics: str | None = None

    @property
    def ok(self) -> bool:
        return self.scale_ok if self.semantics else (self.upstream_ok and self.scale_ok)

    def figures(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class CheckReport:
    """Verdict over all outputs of one call.

    ``passed``: every check (upstream + scale-invariant). ``upstream_passed``: the upstream
    rule alone (what SOL-ExecBench would have said). ``status``: the Status to record.
    ``failed_check``: the first check that failed ("shape", "dtype", "write_coverage",
    "nan_inf", "tolerance", "error_cap", "all_zero", "rel_l2", "norm_max_error",
    "slice_rel_l2"), None when passed.
    """

    passed: bool
    upstream_passed: bool
    status: Status
    failed_check: str | None
    outputs: list[OutputCheck] = field(default_factory=list)
    #: per output, (candidate, reference) relative L2 error against an fp64 truth, when the
    #: caller computed one (``solbench.harness.rounds.Oracle.judge``); None entries: no truth
    truth_errors: list[tuple[float, float] | None] | None = None

    @property
    def figures(self) -> dict[str, Any]:
        return {o.name: o.figures() for o in self.outputs}

    def summary(self) -> dict[str, float | bool]:
        """Worst figures over outputs (for the trace's correctness block)."""
        def worst(attr):
            vals = [getattr(o, attr) for o in self.outputs]
            return max(vals) if vals else 0.0

        return {
            "max_absolute_error": worst("max_abs_error"),
            "max_relative_error": worst("max_rel_error"),
            "rel_l2": worst("rel_l2"),
            "norm_max_error": worst("norm_max_error"),
            "worst_slice_rel_l2": worst("worst_slice_rel_l2"),
            "write_coverage": min((o.write_coverage for o in self.outputs), default=1.0),
            "matched_ratio": min((o.matched_ratio for o in self.outputs), default=1.0),
            "has_nan": any(o.has_nan for o in self.outputs),
            "has_inf": any(o.has_inf for o in self.outputs),
        }


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a-b||_2 / ||b||_2`` in float64 accumulation; 0 when both are 0, inf when only b is."""
    a64, b64 = a.double(), b.double()
    num = torch.linalg.vector_norm(a64 - b64).item()
    den = torch.linalg.vector_norm(b64).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def check_output(
    name: str,
    out: torch.Tensor,
    ref: torch.Tensor,
    tol: Tolerance,
    *,
    poisoned: bool = False,
    ref_error: float | None = None,
    ref_max_error: float | None = None,
    semantics: OutputSemantics | None = None,
    source: torch.Tensor | None = None,
) -> OutputCheck:
    """Check one output. ``ref_error``/``ref_max_error``: the declared-precision reference's
    relative L2 / normalised max error against an fp64 truth (optional; widens the
    scale-invariant limits for ill-conditioned outputs). ``semantics``: a declared set
    semantics (module doc; integer/bool outputs are exact without one); ``source``: the
    input tensor a ``"topk"`` semantics names (required for it)."""
    oc = OutputCheck(name=name, numel=ref.numel())
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        oc.shape_ok = False
        oc.failed_check, oc.detail = "type", f"output is {type(out).__name__}, not a plain torch.Tensor"
        oc.upstream_ok = oc.scale_ok = False
        return oc
    if tuple(out.shape) != tuple(ref.shape):
        oc.shape_ok = False
        oc.failed_check, oc.detail = "shape", f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
        oc.upstream_ok = oc.scale_ok = False
        return oc
    if out.dtype != ref.dtype:
        oc.dtype_ok = False
        oc.failed_check, oc.detail = "dtype", f"dtype {out.dtype} != {ref.dtype}"
        oc.upstream_ok = oc.scale_ok = False
        return oc
    if out.device != ref.device:
        out = out.to(ref.device)
    if ref.numel() == 0:
        return oc
    if semantics is not None and semantics.kind in ("set", "topk"):
        return _check_index_set(oc, out, ref, tol, semantics, source)

    # write coverage: elements still holding the poison pattern where the reference differs
    if poisoned:
        pb = _poison_bits(out.dtype)
        unwritten = (_bits(out) == pb) & (_bits(ref) != pb)
        n_unwritten = int(unwritten.sum().item())
        oc.write_coverage = 1.0 - n_unwritten / unwritten.numel()

    a, b = _as_float(out), _as_float(ref)
    # the common case, every element of both sides finite, is told by the sums: a NaN or an
    # infinity anywhere makes a sum NaN or infinite (an overflowing sum of finite values only
    # takes the exact path below, which decides the same). The masks are made only then.
    # Temporaries are few and reused in place (never ``a``/``b``: they may be the outputs
    # themselves): on the CPU each large one costs its page faults.
    special = not (math.isfinite(float(a.sum().item())) and math.isfinite(float(b.sum().item())))
    finite = None
    if special:
        finite = torch.isfinite(a) & torch.isfinite(b)
        a_nan, b_nan = torch.isnan(a), torch.isnan(b)
        a_inf, b_inf = torch.isinf(a), torch.isinf(b)
        oc.has_nan = bool(a_nan.any().item())
        oc.has_inf = bool(a_inf.any().item())
        both_neg_inf = (a == -math.inf) & (b == -math.inf) if tol.allow_negative_inf else None
        bad_special = a_nan | a_inf
        if both_neg_inf is not None:
            bad_special = bad_special & ~both_neg_inf
        # a NaN/Inf of the candidate is excused only where the reference holds the same
        # special value (a reference with an infinity elsewhere must not excuse a NaN here)
        same_special = (a_nan & b_nan) | (a_inf & b_inf & (a == b))
        af, bf = torch.where(finite, a, 0), torch.where(finite, b, 0)
    else:
        both_neg_inf = None
        af, bf = a, b
    # non-finite positions are 0 on both sides of af/bf, so |af-bf| is the finite difference
    diff = af - bf
    diff.abs_()
    absb = bf.abs()
    oc.max_abs_error = float(diff.max().item()) if diff.numel() else 0.0
    rel = absb.clamp_min(1e-12)
    torch.div(diff, rel, out=rel)
    oc.max_rel_error = float(rel.max().item()) if rel.numel() else 0.0
    del rel
    lim = absb.mul(tol.max_rtol)  # atol + rtol * |b|, in this order of operations
    lim.add_(tol.max_atol)
    matched = diff <= lim
    del lim
    if special:
        matched = matched & finite
        if both_neg_inf is not None:
            matched = matched | both_neg_inf
    oc.matched_ratio = int(matched.sum().item()) / matched.numel()
    del matched
    b_max = float(absb.max().item()) if absb.numel() else 0.0
    # the float64 copies are made once and shared by the relative L2, the reference's norm
    # and the per-slice errors (they were converted three times: the costliest part of a
    # check on the CPU)
    b64 = bf.double()
    d64 = af.double() - b64
    num = torch.linalg.vector_norm(d64).item()
    oc.ref_norm = float(torch.linalg.vector_norm(b64).item())
    oc.rel_l2 = (0.0 if num == 0.0 else math.inf) if oc.ref_norm == 0.0 else num / oc.ref_norm
    oc.norm_max_error = oc.max_abs_error / b_max if b_max > 0 else (0.0 if oc.max_abs_error == 0 else math.inf)
    oc.worst_slice_rel_l2 = _worst_slice_of(d64, b64)

    # ---- upstream rule ----
    eps = dtype_eps(ref.dtype)
    if special and bool((bad_special & ~same_special).any().item()):
        oc.upstream_ok = False
        oc.failed_check = "nan_inf"
        oc.detail = f"output has NaN/Inf (nan={oc.has_nan}, inf={oc.has_inf})"
    elif oc.matched_ratio < tol.required_matched_ratio:
        oc.upstream_ok = False
        oc.failed_check = "tolerance"
        oc.detail = (f"matched {oc.matched_ratio:.4%} < required {tol.required_matched_ratio:.2%} "
                     f"(atol={tol.max_atol}, rtol={tol.max_rtol})")
    elif tol.max_error_cap is not None and oc.max_abs_error > tol.max_error_cap:
        oc.upstream_ok = False
        oc.failed_check = "error_cap"
        oc.detail = f"max abs error {oc.max_abs_error:.3g} > cap {tol.max_error_cap}"
    elif b_max > 0 and _all_zero(a):
        oc.upstream_ok = False
        oc.failed_check = "all_zero"
        oc.detail = "output is all zeros but the reference is not"

    # ---- scale-invariant checks ----
    e_ref = ref_error or 0.0
    e_ref_max = ref_max_error or 0.0
    oc.rel_l2_limit = min(0.5, max(4 * tol.max_rtol, 4 * eps, 8 * e_ref))
    oc.norm_max_limit = min(1.0, max(0.1, 8 * tol.max_rtol, 16 * e_ref_max))
    if poisoned and oc.write_coverage < 1.0:
        oc.scale_ok = False
        if oc.failed_check is None or oc.failed_check == "nan_inf":
            oc.failed_check = "write_coverage"
            oc.detail = f"only {oc.write_coverage:.4%} of the output was written"
    elif oc.upstream_ok and not is_exact_dtype(ref.dtype):  # integers: the exact check below
        if oc.rel_l2 > oc.rel_l2_limit:
            oc.scale_ok = False
            oc.failed_check = "rel_l2"
            oc.detail = f"relative L2 error {oc.rel_l2:.3g} > {oc.rel_l2_limit:.3g}"
        elif oc.worst_slice_rel_l2 > max(oc.rel_l2_limit, 0.25):
            oc.scale_ok = False
            oc.failed_check = "slice_rel_l2"
            oc.detail = f"a slice of the leading dim has relative L2 error {oc.worst_slice_rel_l2:.3g}"
        elif oc.norm_max_error > oc.norm_max_limit:
            oc.scale_ok = False
            oc.failed_check = "norm_max_error"
            oc.detail = (f"max error / max|ref| = {oc.norm_max_error:.3g} > {oc.norm_max_limit:.3g}")

    # ---- exact outputs ----
    if is_exact_dtype(ref.dtype):
        same = out == ref
        n_diff = int((~same).sum().item())
        oc.matched_ratio = 1.0 - n_diff / same.numel()
        if n_diff:
            oc.scale_ok = False
            if oc.failed_check is None:  # else the first failing check stays named
                oc.failed_check = "exact"
                oc.detail = (f"{n_diff} of {same.numel()} elements differ ({ref.dtype} outputs "
                             "compare exactly)")
    return oc


def _check_index_set(oc: OutputCheck, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance,
                     sem: OutputSemantics, source: torch.Tensor | None) -> OutputCheck:
    """Rows (last dim) of integer ``out`` against ``ref`` under a set / topk semantics."""
    oc.semantics = sem.kind
    k = ref.shape[-1] if ref.dim() else 1
    o2, r2 = out.reshape(-1, k).to(torch.int64), ref.reshape(-1, k).to(torch.int64)
    rows = o2.shape[0]
    # what the upstream rule (float cast, tolerance) says, for the record
    a, b = o2.double(), r2.double()
    up_match = ((a - b).abs() <= tol.max_atol + tol.max_rtol * b.abs()).double().mean().item()
    oc.upstream_ok = up_match >= tol.required_matched_ratio
    oc.max_abs_error = float((a - b).abs().max().item())
    os_, rs_ = o2.sort(dim=-1).values, r2.sort(dim=-1).values
    if sem.kind == "set":
        row_ok = (os_ == rs_).all(dim=-1)
        why = "rows whose index sets differ"
    else:
        if source is None:
            raise ValueError(f"output {oc.name!r}: topk semantics needs the source tensor {sem.source!r}")
        n = source.shape[-1]
        src = source.reshape(-1, n).to(out.device)
        if src.shape[0] != rows:
            raise ValueError(f"output {oc.name!r}: source {sem.source!r} has {src.shape[0]} rows, output {rows}")
        in_range = ((o2 >= 0) & (o2 < n)).all(dim=-1)
        unique = (os_[:, 1:] != os_[:, :-1]).all(dim=-1) if k > 1 else torch.ones_like(in_range)
        safe = o2.clamp(0, max(n - 1, 0))
        got = src.gather(-1, safe).sort(dim=-1).values
        want = src.gather(-1, r2).sort(dim=-1).values
        same_vals = ((got == want) | (torch.isnan(got) & torch.isnan(want))).all(dim=-1)
        row_ok = in_range & unique & same_vals
        why = (f"rows with an index out of [0, {n}), a repeated index, or gathered values that "
               f"differ from the reference's")
    oc.matched_ratio = float(row_ok.double().mean().item())
    bad = int((~row_ok).sum().item())
    if bad:
        oc.scale_ok = False
        oc.failed_check = "index_set"
        oc.detail = f"{bad} of {rows} {why} ({sem.kind} semantics)"
    return oc


def _all_zero(a: torch.Tensor) -> bool:
    """Every element of ``a`` is zero (max |a| == 0; a NaN is not zero)."""
    if not a.numel():
        return True
    lo, hi = torch.aminmax(a)
    return float(lo.item()) == 0.0 and float(hi.item()) == 0.0


def _worst_slice(a: torch.Tensor, b: torch.Tensor, max_slices: int = 64) -> float:
    """Worst relative L2 error over up to ``max_slices`` contiguous chunks of the flattened
    output, ignoring chunks whose reference norm is below 1e-3 of the median chunk norm."""
    return _worst_slice_of(a.double() - b.double(), b.double(), max_slices)


def _worst_slice_of(d: torch.Tensor, b: torch.Tensor, max_slices: int = 64) -> float:
    """:func:`_worst_slice` from the float64 difference ``d = a - b`` and ``b``."""
    n = d.numel()
    if n < 2:
        return 0.0
    k = min(max_slices, n)
    d2 = d.reshape(-1)
    b2 = b.reshape(-1)
    pad = (-n) % k
    if pad:
        d2 = torch.cat([d2, d2.new_zeros(pad)])
        b2 = torch.cat([b2, b2.new_zeros(pad)])
    d2, b2 = d2.view(k, -1), b2.view(k, -1)
    num = torch.linalg.vector_norm(d2, dim=1)
    den = torch.linalg.vector_norm(b2, dim=1)
    med = den.median()
    keep = den > 1e-3 * med
    if not bool(keep.any()):
        return 0.0
    return float((num[keep] / den[keep]).max().item())


def _source(name, semantics, inputs):
    sem = (semantics or {}).get(name)
    if sem is None or sem.kind != "topk":
        return None
    if not inputs or sem.source not in inputs:
        raise ValueError(f"output {name!r}: topk semantics names input {sem.source!r}, not given")
    return inputs[sem.source]


def check_outputs(
    outputs: Sequence[Any],
    references: Sequence[torch.Tensor],
    tolerance: Tolerance,
    *,
    names: Sequence[str] | None = None,
    poisoned: bool = False,
    ref_errors: Sequence[float | None] | None = None,
    ref_max_errors: Sequence[float | None] | None = None,
    semantics: dict[str, OutputSemantics] | None = None,
    inputs: dict[str, Any] | None = None,
) -> CheckReport:
    """Check every output (same order as ``references``).

    Args:
        outputs: candidate outputs (tensors in the declared order).
        references: reference outputs (declared shapes and dtypes).
        tolerance: the workload's tolerance.
        names: output names for the report.
        poisoned: the outputs were pre-filled with :data:`POISON_BYTE` (DPS buffers), so
            write coverage is measured.
        ref_errors / ref_max_errors: per output, the declared-precision reference's error vs
            an fp64 truth (see module doc); None entries mean unknown.
        semantics: output name -> declared :class:`OutputSemantics` (e.g. from
            :func:`infer_semantics`); absent outputs use the default rule.
        inputs: input name -> value, for the ``source`` of a ``"topk"`` semantics.

    Returns:
        A CheckReport. Never raises for bad outputs: a wrong count, type, shape or dtype
        is a verdict, not an exception.
    """
    names = list(names or [f"output{i}" for i in range(len(references))])
    if len(outputs) != len(references):
        oc = OutputCheck(name="*", shape_ok=False, upstream_ok=False, scale_ok=False,
                         failed_check="shape",
                         detail=f"{len(outputs)} outputs returned, {len(references)} expected")
        return CheckReport(False, False, Status.INCORRECT_SHAPE, "shape", [oc])
    checks = []
    for i, (o, r) in enumerate(zip(outputs, references)):
        checks.append(check_output(
            names[i], o, r, tolerance, poisoned=poisoned,
            ref_error=(ref_errors[i] if ref_errors else None),
            ref_max_error=(ref_max_errors[i] if ref_max_errors else None),
            semantics=(semantics or {}).get(names[i]),
            source=_source(names[i], semantics, inputs),
        ))
    upstream = all(c.upstream_ok for c in checks)
    passed = all(c.ok for c in checks)
    failed = next((c for c in checks if c.failed_check), None)
    if passed:
        status = Status.PASSED
    elif any(c.failed_check in ("shape", "type") for c in checks):
        status = Status.INCORRECT_SHAPE
    elif any(c.failed_check == "dtype" for c in checks):
        status = Status.INCORRECT_DTYPE
    else:
        status = Status.INCORRECT_NUMERICAL
    return CheckReport(passed, upstream, status, failed.failed_check if failed else None, checks)
