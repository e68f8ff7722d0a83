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
    """Fill ``t`` in place with the poison byte pattern (any dtype, any strides). Returns ``t``.
    A non-contiguous ``t`` is filled through a byte view of its own storage (its shape plus
    one dim of its element's bytes, its strides in bytes): a fill with a value would write a
    default NaN in floats (not the all-ones payload the replay check reads), fail in integers
    and write 1 in bools."""
    if t.numel():
        if t.is_contiguous():
            t.reshape(-1).view(torch.uint8).fill_(POISON_BYTE)
        else:
            es = t.element_size()
            u = torch.empty(0, dtype=torch.uint8, device=t.device)
            u.set_(t.untyped_storage(), t.storage_offset() * es, tuple(t.shape) + (es,),
                   tuple(x * es for x in t.stride()) + (1,))
            u.fill_(POISON_BYTE)
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


#: the E2M1 table per device it was used on
_E2M1_ON: dict[torch.device, torch.Tensor] = {}


def unpack_fp4(t: torch.Tensor) -> torch.Tensor:
    """Unpack ``float4_e2m1fn_x2`` [..., n] into float32 [..., 2n] (low nibble first)."""
    b = t.view(torch.uint8).to(torch.int64)
    lut = _E2M1_ON.get(t.device)
    if lut is None:  # once a device: a host-to-device copy per chunk compared, else
        lut = _E2M1_ON[t.device] = torch.tensor(_E2M1, dtype=torch.float32, device=t.device)
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
    #: where the elements outside the elementwise tolerance lie, when any are
    #: (:func:`_misses`): their count, the first and last one's index, the count in each of
    #: up to 64 equal slices of the flattened output, and the element of the largest
    #: absolute error with both values
    misses: dict | None = None

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
    #: runs of the reference beyond the first this verdict needed (Oracle.judge: an output
    #: that missed the elementwise tolerance of a reference whose own runs differ, judged
    #: again against another run of it); 0 when the first sufficed
    reference_reruns: int = 0

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
    """``||a-b||_2 / ||b||_2`` in float64 accumulation; 0 when both are 0, inf when only b is.
    ``a`` and ``b``: the same number of elements, any float dtypes and one device; compared
    :data:`COMPARE_CHUNK` elements at a time (float64 copies of a chunk, not of the whole)."""
    _same_shape(a, b)
    fa, fb = _flat(a), _flat(b)
    dn, bn = [], []
    for s in range(0, fb.numel(), COMPARE_CHUNK):
        b64 = fb[s:s + COMPARE_CHUNK].double()
        d64 = fa[s:s + COMPARE_CHUNK].double() - b64
        dn.append(float(torch.linalg.vector_norm(d64).item()))
        bn.append(float(torch.linalg.vector_norm(b64).item()))
    num, den = _norm_of(dn), _norm_of(bn)
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def norm_max_error(a: torch.Tensor, t: torch.Tensor) -> float:
    """``max|a - t| / max|t|`` in float64 (0 when ``t`` is all zeros or empty); chunked as
    :func:`rel_l2`."""
    _same_shape(a, t)
    fa, ft = _flat(a), _flat(t)
    e = m = 0.0
    for s in range(0, ft.numel(), COMPARE_CHUNK):
        t64 = ft[s:s + COMPARE_CHUNK].double()
        m = _max_nan(m, float(t64.abs().max().item()))
        e = _max_nan(e, float((fa[s:s + COMPARE_CHUNK].double() - t64).abs().max().item()))
    return e / m if m > 0 else 0.0  # a NaN in t: not > 0, so 0 (as one max over the whole)


def _max_nan(x: float, y: float) -> float:
    """max of two floats that keeps a NaN (as a tensor's max does)."""
    return math.nan if math.isnan(x) or math.isnan(y) else max(x, y)


def _norm_of(norms: list[float]) -> float:
    """The 2-norm of a vector from the 2-norms of its pieces: NaN when a piece's is NaN (as
    one norm over the whole; ``math.hypot`` would give inf beside an infinite piece)."""
    if any(math.isnan(x) for x in norms):
        return math.nan
    return math.hypot(*norms)


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"shapes differ: {tuple(a.shape)} and {tuple(b.shape)}")


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

    st = _compare_chunked(out, ref, tol, poisoned)
    if poisoned:
        oc.write_coverage = 1.0 - st.unwritten / max(ref.numel(), 1)
    oc.has_nan, oc.has_inf = st.has_nan, st.has_inf
    oc.max_abs_error, oc.max_rel_error = st.max_abs, st.max_rel
    oc.matched_ratio = st.matched / st.n
    b_max = st.b_max
    num = _norm_of(st.d_norms)
    oc.ref_norm = _norm_of(st.b_norms)
    oc.rel_l2 = (0.0 if num == 0.0 else math.inf) if oc.ref_norm == 0.0 else num / oc.ref_norm
    oc.norm_max_error = oc.max_abs_error / b_max if b_max > 0 else (0.0 if oc.max_abs_error == 0 else math.inf)
    oc.worst_slice_rel_l2 = _worst_of_slices(st.slice_d, st.slice_b)
    if st.matched < st.n:
        oc.misses = _misses(st, tuple(ref.shape), ref.dtype == torch.float4_e2m1fn_x2)

    # ---- upstream rule ----
    eps = dtype_eps(ref.dtype)
    if st.bad_special:
        oc.upstream_ok = False
        oc.failed_check = "nan_inf"
        oc.detail = f"output has NaN/Inf (nan={oc.has_nan}, inf={oc.has_inf})"
    elif oc.matched_ratio < tol.required_matched_ratio:
        oc.upstream_ok = False
        oc.failed_check = "tolerance"
        oc.detail = (f"matched {oc.matched_ratio:.4%} < required {tol.required_matched_ratio:.2%} "
                     f"(atol={tol.max_atol}, rtol={tol.max_rtol})" + _largest_error_text(oc.misses))
    elif tol.max_error_cap is not None and oc.max_abs_error > tol.max_error_cap:
        oc.upstream_ok = False
        oc.failed_check = "error_cap"
        oc.detail = f"max abs error {oc.max_abs_error:.3g} > cap {tol.max_error_cap}"
    elif b_max > 0 and st.a_all_zero:
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
        n_diff = st.n_diff
        oc.matched_ratio = 1.0 - n_diff / ref.numel()
        if n_diff:
            oc.scale_ok = False
            if oc.failed_check is None:  # else the first failing check stays named
                oc.failed_check = "exact"
                oc.detail = (f"{n_diff} of {ref.numel()} elements differ ({ref.dtype} outputs "
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


#: elements of one output compared at a time. The comparison makes about 40 bytes of
#: temporaries an element (float32 copies, the difference, masks, float64 copies for the
#: norms): whole-output temporaries of an 18.8 GB workload took the harness past the H200's
#: memory; a chunk keeps them near 1.3 GB. The figures do not depend on it (norms of chunks
#: combine exactly up to rounding; maxima and counts exactly).
COMPARE_CHUNK = 1 << 25


@dataclass
class _Stats:
    """What :func:`_compare_chunked` gathers over an output's chunks."""

    n: int = 0  #: compared elements (unpacked for fp4)
    unwritten: int = 0
    has_nan: bool = False
    has_inf: bool = False
    bad_special: bool = False
    max_abs: float = 0.0
    max_rel: float = 0.0
    matched: int = 0
    b_max: float = 0.0
    a_all_zero: bool = True
    n_diff: int = 0
    d_norms: list = field(default_factory=list)
    b_norms: list = field(default_factory=list)
    #: flat indices of the first and last element outside the tolerance (-1: none), misses
    #: per slice (the same 64 slices as the norms), and the element of the largest absolute
    #: error: (flat index, candidate value, reference value)
    first_miss: int = -1
    last_miss: int = -1
    miss_slices: list = field(default_factory=list)
    worst: tuple | None = None
    #: per slice of the flattened output (up to 64 contiguous ones), the norms of its pieces
    slice_d: list = field(default_factory=list)
    slice_b: list = field(default_factory=list)


def _flat(t: torch.Tensor) -> torch.Tensor:
    """1-D view of ``t`` in its logical (row-major) order; a copy only when ``t`` is not
    contiguous (in its own dtype; packed fp4, which torch cannot copy, by its bytes)."""
    if t.dtype == torch.float4_e2m1fn_x2 and not t.is_contiguous():
        return t.view(torch.uint8).reshape(-1).view(t.dtype)
    return t.reshape(-1)


def _spans(n: int, slice_len: int, even: bool, chunk: int) -> list[tuple[int, int]]:
    """[start, stop) spans of ``n`` compared elements, about ``chunk`` each: whole slices of
    ``slice_len`` when a slice fits (so a slice's norm is one reduction), else pieces of one
    slice. ``even``: every boundary but ``n`` even (two fp4 values a byte)."""
    if slice_len <= chunk:
        step = max(1, chunk // slice_len) * slice_len
        if even and step % 2:
            step *= 2
    else:
        step = max(2, chunk - chunk % 2) if even else chunk
    return [(s, min(s + step, n)) for s in range(0, n, step)]


def _compare_chunked(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, poisoned: bool,
                     chunk: int | None = None) -> _Stats:
    """Elementwise figures of ``out`` against ``ref`` (same shape, dtype and device), computed
    chunk by chunk over the flattened tensors (:data:`COMPARE_CHUNK` elements at a time)."""
    chunk = chunk or COMPARE_CHUNK
    fp4 = ref.dtype == torch.float4_e2m1fn_x2
    fo, fr = _flat(out), _flat(ref)
    st = _Stats(n=fr.numel() * (2 if fp4 else 1))
    n = st.n
    k = min(64, n)
    slice_len = -(-n // k) if n else 1
    st.slice_d = [[] for _ in range(k)]
    st.slice_b = [[] for _ in range(k)]
    st.miss_slices = [0] * k
    exact = is_exact_dtype(ref.dtype)
    pb = _poison_bits(out.dtype) if poisoned else None
    for s, e in _spans(n, slice_len, fp4, chunk):
        ps, pe = (s // 2, -(-e // 2)) if fp4 else (s, e)
        oc_, rc_ = fo[ps:pe], fr[ps:pe]
        # the chunk's two counts travel with its figures (_compare_piece: one read)
        counts = []
        if poisoned:
            counts.append(((_bits(oc_) == pb) & (_bits(rc_) != pb)).sum())
        if exact:
            counts.append((oc_ != rc_).sum())
        a, b = _as_float(oc_), _as_float(rc_)
        got = _compare_piece(st, a, b, tol, s, slice_len, counts)
        if poisoned:
            st.unwritten += int(got.pop(0))
        if exact:
            st.n_diff += int(got.pop(0))
    return st


def _read(parts: list[torch.Tensor]) -> list[float]:
    """The values of ``parts`` (0-d or 1-d tensors of one device) as Python floats, in order,
    in one device-to-host transfer. Exact: every float32 or float64 value and every integer
    count below 2**53 is a float64 as is."""
    if not parts:
        return []
    return torch.cat([p.reshape(-1).to(torch.float64) for p in parts]).tolist()


def _compare_piece(st: _Stats, a: torch.Tensor, b: torch.Tensor, tol: Tolerance, start: int,
                   slice_len: int, counts: list[torch.Tensor] | tuple = ()) -> list[float]:
    """Add the figures of one chunk (float copies ``a``/``b`` of elements start.. of the
    flattened output) to ``st``; return the values of ``counts`` (0-d tensors of the chunk,
    read in the same transfer).

    The common case, every element of both sides finite, is told by the sums (a NaN or an
    infinity anywhere makes a sum NaN or infinite; an overflowing sum of finite values only
    takes the masked path, which decides the same). Its figures are computed on that
    assumption and read from the device together with the sums, in one transfer: on CUDA
    each separate read is a synchronisation, a dozen a chunk otherwise. Where a sum is not
    finite they are dropped and made again with the masks."""
    fig = _PieceFigures(a, b, a, b, tol, start, slice_len, st.n, zero=st.a_all_zero)
    got = _read([a.sum(), b.sum(), *counts] + fig.parts)
    sums, cnt, vals = got[:2], got[2:2 + len(counts)], got[2 + len(counts):]
    if math.isfinite(sums[0]) and math.isfinite(sums[1]):
        fig.apply(st, vals)
        return cnt
    del fig
    finite = torch.isfinite(a) & torch.isfinite(b)
    a_nan, b_nan = torch.isnan(a), torch.isnan(b)
    a_inf, b_inf = torch.isinf(a), torch.isinf(b)
    both_neg_inf = (a == -math.inf) & (b == -math.inf) if tol.allow_negative_inf else None
    bad_special = a_nan | a_inf
    if both_neg_inf is not None:
        bad_special = bad_special & ~both_neg_inf
    # a NaN/Inf of the candidate is excused only where the reference holds the same
    # special value (a reference with an infinity elsewhere must not excuse a NaN here)
    same_special = (a_nan & b_nan) | (a_inf & b_inf & (a == b))
    flags = [a_nan.any(), a_inf.any(), (bad_special & ~same_special).any()]
    del a_nan, b_nan, a_inf, b_inf, bad_special, same_special
    # non-finite positions are 0 on both sides of af/bf, so |af-bf| is the finite difference
    af, bf = torch.where(finite, a, 0), torch.where(finite, b, 0)
    fig = _PieceFigures(af, bf, a, b, tol, start, slice_len, st.n, zero=st.a_all_zero,
                        finite=finite, both_neg_inf=both_neg_inf)
    got = _read(flags + fig.parts)
    st.has_nan |= bool(got[0])
    st.has_inf |= bool(got[1])
    st.bad_special |= bool(got[2])
    fig.apply(st, got[3:])
    return cnt


class _PieceFigures:
    """The figures of one chunk as device tensors (:attr:`parts`), before any is read:
    ``af``/``bf`` the values compared (``a``/``b`` with non-finite positions zeroed when
    ``finite`` is given), ``a``/``b`` the chunk itself (the largest error's values, the
    all-zero test). :meth:`apply` adds them, read, to a :class:`_Stats`."""

    def __init__(self, af: torch.Tensor, bf: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                 tol: Tolerance, start: int, slice_len: int, n: int, *, zero: bool,
                 finite: torch.Tensor | None = None, both_neg_inf: torch.Tensor | None = None):
        self.start, self.slice_len, self.m = start, slice_len, af.numel()
        parts: list[torch.Tensor] = []
        # temporaries are few and reused in place (never af/bf: they may be the outputs
        # themselves): on the CPU each large one costs its page faults
        diff = af - bf
        diff.abs_()
        absb = bf.abs()
        self.has = bool(self.m)
        if self.has:
            # the largest error, where it is and both values there; indexed with a 1-element
            # tensor, since a 0-d index is read to the host first (a synchronisation on CUDA)
            k = diff.argmax().reshape(1)
            parts.append(torch.cat((diff[k].double(), a[k].double(), b[k].double(), k.double())))
            rel = absb.clamp_min(1e-12)
            torch.div(diff, rel, out=rel)
            parts.append(rel.max())
            del rel
        lim = absb.mul(tol.max_rtol)  # atol + rtol * |b|, in this order of operations
        lim.add_(tol.max_atol)
        matched = diff <= lim
        del lim
        if finite is not None:
            matched = matched & finite
            if both_neg_inf is not None:
                matched = matched | both_neg_inf
        parts.append(matched.sum())
        #: kept until the count is read: the misses' positions need it when some element missed
        self.matched = matched
        if self.has:
            parts.append(absb.max())
        self.zero = zero and self.has
        if self.zero:
            parts.extend(torch.aminmax(a))
        del diff, absb
        # float64 copies, shared by the relative L2, the reference's norm and the slices
        b64 = bf.double()
        d64 = af.double() - b64
        parts.append(torch.linalg.vector_norm(d64))
        parts.append(torch.linalg.vector_norm(b64))
        # the slices' norms: one reduction per slice where the chunk is whole slices (the
        # last one may be short: zeros pad it), else one per piece of a slice
        m = self.m
        self.first = start // slice_len
        self.whole = start % slice_len == 0 and (m % slice_len == 0 or start + m == n)
        if self.whole:
            pad = (-m) % slice_len
            if pad:
                d64 = torch.cat([d64, d64.new_zeros(pad)])
                b64 = torch.cat([b64, b64.new_zeros(pad)])
            self.n_slices = d64.numel() // slice_len
            parts.append(torch.linalg.vector_norm(d64.view(-1, slice_len), dim=1))
            parts.append(torch.linalg.vector_norm(b64.view(-1, slice_len), dim=1))
        else:  # a piece of one slice, or straddling two
            self.pieces = []
            i = self.first
            while i * slice_len < start + m:
                lo, hi = max(start, i * slice_len) - start, min(start + m, (i + 1) * slice_len) - start
                self.pieces.append(i)
                parts.append(torch.linalg.vector_norm(d64[lo:hi]))
                parts.append(torch.linalg.vector_norm(b64[lo:hi]))
                i += 1
        self.parts = parts

    def apply(self, st: _Stats, vals: list[float]) -> None:
        """Add the figures, as read (``vals``, in the order of :attr:`parts`), to ``st``."""
        it = iter(vals)
        if self.has:
            top, va, vb, j = next(it), next(it), next(it), next(it)
            if st.worst is None or top > st.max_abs:
                st.worst = (self.start + int(j), va, vb)
            st.max_abs = max(st.max_abs, top)
            st.max_rel = max(st.max_rel, next(it))
        hits = int(next(it))
        st.matched += hits
        if hits < self.m:
            _record_misses(st, ~self.matched, self.start, self.slice_len)
        self.matched = None
        if self.has:
            st.b_max = max(st.b_max, next(it))
        if self.zero:
            lo, hi = next(it), next(it)
            st.a_all_zero = lo == 0.0 and hi == 0.0
        st.d_norms.append(next(it))
        st.b_norms.append(next(it))
        if self.whole:
            dn = [next(it) for _ in range(self.n_slices)]
            bn = [next(it) for _ in range(self.n_slices)]
            for j, (x, y) in enumerate(zip(dn, bn)):
                st.slice_d[self.first + j].append(x)
                st.slice_b[self.first + j].append(y)
        else:
            for i in self.pieces:
                st.slice_d[i].append(next(it))
                st.slice_b[i].append(next(it))


def _misses(st: _Stats, shape: tuple, fp4: bool) -> dict[str, Any]:
    """The ``misses`` record of an output (:attr:`OutputCheck.misses`). Indices are the
    output's own (row-major) for every dtype but packed fp4, whose are flat over the
    unpacked values."""
    def at(flat: int) -> list[int]:
        if fp4 or not shape:
            return [flat]
        idx = []
        for d in reversed(shape):
            idx.append(flat % d)
            flat //= d
        return idx[::-1]

    rec: dict[str, Any] = {"elements": st.n - st.matched, "of": st.n,
                           "first": at(st.first_miss), "last": at(st.last_miss),
                           "slice_elements": -(-st.n // max(len(st.miss_slices), 1)),
                           "by_slice": list(st.miss_slices)}
    if st.worst is not None and st.max_abs > 0:  # else every miss is a NaN/Inf: first/last name them
        j, a, b = st.worst
        rec["largest_error"] = {"index": at(j), "candidate": a, "reference": b}
    return rec


def _largest_error_text(misses: dict | None) -> str:
    """``; largest error at [2, 1]: 21 against 17`` (empty without a record)."""
    big = (misses or {}).get("largest_error")
    if not big:
        return ""
    return f"; largest error at {big['index']}: {big['candidate']:.6g} against {big['reference']:.6g}"


def _record_misses(st: _Stats, miss: torch.Tensor, start: int, slice_len: int) -> None:
    """Where the elements outside the tolerance lie (``miss``: bool, elements start.. of the
    flattened output): the first and last one and a count per slice, so a failure says
    whether its misses are everywhere, in one block or in a region of values."""
    m = miss.numel()
    as_u8 = miss.to(torch.uint8)
    # argmax of a 0/1 vector is the first 1 (torch returns the first of equal maxima)
    first = start + int(as_u8.argmax().item())
    last = start + m - 1 - int(as_u8.flip(0).argmax().item())
    if st.first_miss < 0:
        st.first_miss = first
    st.last_miss = max(st.last_miss, last)
    i = start // slice_len
    while i * slice_len < start + m:
        lo, hi = max(start, i * slice_len) - start, min(start + m, (i + 1) * slice_len) - start
        st.miss_slices[i] += int(as_u8[lo:hi].sum().item())
        i += 1


def _worst_of_slices(slice_d: list, slice_b: list) -> float:
    """Worst relative L2 error (difference norm over reference norm) over the slices of the
    flattened output whose reference norm is at least 1e-3 of the median slice norm; 0 under
    two compared elements."""
    if len(slice_d) < 2:
        return 0.0
    num = torch.tensor([_norm_of(x) for x in slice_d], dtype=torch.float64)
    den = torch.tensor([_norm_of(x) for x in slice_b], dtype=torch.float64)
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
