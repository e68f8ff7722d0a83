"""Correctness checks (pure functions) against hand-worked figures: the upstream tolerance
rule, the scale-invariant checks, poison write coverage, NaN/Inf, -inf allowance, exact
integer comparison and shape/dtype verdicts."""

import math

import pytest
import torch

from solbench.harness.correctness import (POISON_BYTE, check_output, check_outputs, dtype_eps,
                                          poison_, rel_l2, unpack_fp4)
from solbench.spec import Status, Tolerance

# reference [1, 2, 4, 64] with errors [1/64, 1/32, 1/16, 1/2] (all exactly representable)
REF = torch.tensor([1.0, 2.0, 4.0, 64.0])
ERR = torch.tensor([1 / 64, 1 / 32, 1 / 16, 1 / 2])
# atol = 1/64, rtol = 1/128 -> thresholds 1/64+1/128, 1/32, 3/64, 1/64+1/2:
# matches: yes, yes (on the boundary), no, yes -> 3/4
TOL = dict(max_atol=1 / 64, max_rtol=1 / 128)


def test_atol_rtol_matched_ratio_hand_worked():
    oc = check_output("o", REF + ERR, REF, Tolerance(**TOL, required_matched_ratio=0.75))
    assert oc.matched_ratio == 0.75
    assert oc.max_abs_error == 0.5
    assert oc.max_rel_error == 1 / 64  # 1/64 / 1 = 1/32 / 2 = 1/16 / 4; 1/2 / 64 = 1/128
    want_l2 = math.sqrt(sum(e * e for e in ERR.tolist())) / math.sqrt(1 + 4 + 16 + 4096)
    assert oc.rel_l2 == pytest.approx(want_l2, rel=1e-12)
    assert oc.norm_max_error == pytest.approx(0.5 / 64)
    assert oc.worst_slice_rel_l2 == pytest.approx(1 / 64)  # 4 one-element slices
    assert oc.rel_l2_limit == pytest.approx(4 / 128)  # max(4 rtol, 4 eps32)
    assert oc.upstream_ok and oc.scale_ok and oc.failed_check is None
    rep = check_outputs([REF + ERR], [REF], Tolerance(**TOL, required_matched_ratio=0.8))
    assert not rep.passed and not rep.upstream_passed
    assert rep.status == Status.INCORRECT_NUMERICAL and rep.failed_check == "tolerance"
    assert "matched 75.0000% < required 80.00%" in rep.outputs[0].detail


def test_error_cap():
    tol = Tolerance(**TOL, required_matched_ratio=0.75, max_error_cap=0.25)
    oc = check_output("o", REF + ERR, REF, tol)
    assert not oc.upstream_ok and oc.failed_check == "error_cap"
    oc = check_output("o", REF + ERR, REF, Tolerance(**TOL, required_matched_ratio=0.75, max_error_cap=0.5))
    assert oc.upstream_ok


def test_all_zeros_against_tiny_reference_fails_both_layers():
    ref = torch.tensor([1e-4, -2e-4, 3e-4, -1e-4])
    out = torch.zeros(4)
    # every element is within atol = 1e-2, so only the all-zero rule catches it upstream
    rep = check_outputs([out], [ref], Tolerance())
    oc = rep.outputs[0]
    assert oc.matched_ratio == 1.0
    assert not rep.passed and not rep.upstream_passed and oc.failed_check == "all_zero"
    assert oc.rel_l2 == 1.0 and oc.rel_l2 > oc.rel_l2_limit  # ||0 - b|| / ||b||
    assert rep.status == Status.INCORRECT_NUMERICAL


def test_tiny_constant_passes_upstream_fails_rel_l2():
    ref = torch.tensor([1e-3, -1e-3, 1e-3, -1e-3])
    out = torch.full((4,), 1e-3)
    rep = check_outputs([out], [ref], Tolerance())
    oc = rep.outputs[0]
    assert rep.upstream_passed and not rep.passed
    assert oc.failed_check == "rel_l2"
    # diffs [0, 2e-3, 0, 2e-3]: sqrt(8e-6) / sqrt(4e-6) = sqrt(2)
    assert oc.rel_l2 == pytest.approx(math.sqrt(2), rel=1e-6)
    assert rep.summary()["rel_l2"] == pytest.approx(math.sqrt(2), rel=1e-6)


def test_scaled_output_fails_norm_max_but_passes_rel_l2():
    # one outlier: rel_l2 small, max error / max|ref| large
    ref = torch.ones(1000)
    out = ref.clone()
    out[7] = 1.5
    oc = check_output("o", out, ref, Tolerance(required_matched_ratio=0.99))
    assert oc.matched_ratio == 0.999 and oc.upstream_ok
    assert oc.rel_l2 == pytest.approx(0.5 / math.sqrt(1000))
    assert oc.failed_check == "norm_max_error" and oc.norm_max_error == 0.5


def test_write_coverage_exact_fraction():
    ref = torch.arange(1.0, 9.0)  # 8 elements, none equal to the poison pattern
    out = poison_(torch.empty(8))
    assert torch.isnan(out).all()
    out[:6] = ref[:6]
    oc = check_output("o", out, ref, Tolerance(), poisoned=True)
    assert oc.write_coverage == 0.75
    assert oc.failed_check == "write_coverage" and not oc.scale_ok
    assert check_outputs([out], [ref], Tolerance(), poisoned=True).status == Status.INCORRECT_NUMERICAL
    # without the poison flag the same output is a NaN/Inf failure
    assert check_output("o", out, ref, Tolerance()).failed_check == "nan_inf"


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int64, torch.int8, torch.bool,
                                torch.float8_e4m3fn, torch.float4_e2m1fn_x2])
def test_poison_of_a_strided_view_writes_its_bytes_only(dt):
    """A transposed, sliced view (not contiguous) gets the poison byte in exactly its own
    elements' bytes; the rest of the storage is untouched (a fill with a value would write a
    default NaN in floats, fail in integers, write 1 in bools)."""
    raw = torch.zeros(6, 8, 8, dtype=torch.uint8)  # 8 bytes an element: room for every dtype
    es = torch.empty(0, dtype=dt).element_size()
    base = raw[:, :, :es].contiguous().view(dt).reshape(6, 8)  # 6x8 elements of dt, zero bits
    t = base.t()[1:, ::2]  # 7x3, strides (1, 16): not contiguous
    assert not t.is_contiguous()
    poison_(t)
    b = base.view(torch.uint8).reshape(6, 8, es)
    want = torch.zeros(6, 8, dtype=torch.bool)
    want[::2, 1:] = True  # t[i, j] is base[2j, i + 1]
    assert bool((b[want] == POISON_BYTE).all()) and bool((b[~want] == 0).all())


def test_write_coverage_ignores_positions_where_reference_equals_poison():
    # int32 poison is -1 (all bytes 0xFF): an unwritten -1 where the reference is -1 is fine
    ref = torch.tensor([-1, 5, 7, -1], dtype=torch.int32)
    out = poison_(torch.empty(4, dtype=torch.int32))
    assert out.tolist() == [-1, -1, -1, -1]
    out[1], out[2] = 5, 7
    oc = check_output("o", out, ref, Tolerance(max_atol=0, max_rtol=0), poisoned=True)
    assert oc.write_coverage == 1.0 and oc.failed_check is None
    out[2] = -1  # left unwritten where the reference is 7
    oc = check_output("o", out, ref, Tolerance(max_atol=0, max_rtol=0), poisoned=True)
    assert oc.write_coverage == 0.75 and not oc.scale_ok
    assert oc.failed_check == "tolerance"  # -1 is a finite int: the first failing check is named


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64,
                                   torch.float8_e4m3fn, torch.bool])
def test_poison_fills_every_byte(dtype):
    t = torch.zeros(3, 5, dtype=dtype)
    poison_(t)
    assert (t.view(torch.uint8) == POISON_BYTE).all()
    z = torch.zeros((), dtype=dtype)  # 0-d outputs (scalars like a loss) are poisoned too
    poison_(z)
    assert (z.reshape(-1).view(torch.uint8) == POISON_BYTE).all()


def test_nan_and_inf_fail():
    ref = torch.arange(200, dtype=torch.float32)
    out = ref.clone()
    out[5] = float("nan")  # 199/200 matched >= 0.99, but NaN anywhere fails
    oc = check_output("o", out, ref, Tolerance())
    assert oc.has_nan and not oc.has_inf and oc.failed_check == "nan_inf"
    out = ref.clone()
    out[5] = float("inf")
    oc = check_output("o", out, ref, Tolerance())
    assert oc.has_inf and oc.failed_check == "nan_inf"


def test_nan_fails_even_when_the_reference_has_an_infinity_elsewhere():
    ref = torch.arange(200, dtype=torch.float32)
    ref[0] = -math.inf
    out = ref.clone()
    out[5] = float("nan")  # 198/200 matched = 0.99, so only the NaN check can catch it
    oc = check_output("o", out, ref, Tolerance())
    assert oc.failed_check == "nan_inf", oc.detail
    oc = check_output("o", out, ref, Tolerance(allow_negative_inf=True))
    assert oc.failed_check == "nan_inf", oc.detail


def test_allow_negative_inf():
    ref = torch.tensor([-math.inf, 1.0, 2.0])
    out = ref.clone()
    # not allowed: the -inf position does not match -> 2/3 matched
    oc = check_output("o", out, ref, Tolerance())
    assert oc.matched_ratio == pytest.approx(2 / 3) and oc.failed_check == "tolerance"
    oc = check_output("o", out, ref, Tolerance(allow_negative_inf=True))
    assert oc.matched_ratio == 1.0 and oc.failed_check is None and oc.has_inf
    # -inf where the reference is finite still fails under the allowance
    out2 = torch.tensor([-math.inf, -math.inf, 2.0])
    oc = check_output("o", out2, ref, Tolerance(allow_negative_inf=True))
    assert oc.failed_check == "nan_inf"
    # +inf against -inf is not allowed
    out3 = torch.tensor([math.inf, 1.0, 2.0])
    assert check_output("o", out3, ref, Tolerance(allow_negative_inf=True)).failed_check is not None


def test_integer_outputs_exact_above_2_24():
    big = 2**24 + 1  # float32 rounds it to 2^24
    ref = torch.tensor([big, 3], dtype=torch.int64)
    out = torch.tensor([big - 1, 3], dtype=torch.int64)
    assert float(torch.tensor(big, dtype=torch.float32)) == float(big - 1)
    oc = check_output("o", out, ref, Tolerance(max_atol=0, max_rtol=0, required_matched_ratio=1.0))
    assert oc.max_abs_error == 1.0 and oc.matched_ratio == 0.5 and oc.failed_check == "tolerance"
    oc = check_output("o", ref.clone(), ref, Tolerance(max_atol=0, max_rtol=0, required_matched_ratio=1.0))
    assert oc.max_abs_error == 0.0 and oc.failed_check is None
    big53 = 2**53 - 1
    ref = torch.tensor([big53], dtype=torch.int64)
    oc = check_output("o", ref - 1, ref, Tolerance(max_atol=0, max_rtol=0))
    assert oc.max_abs_error == 1.0


def test_shape_dtype_count_and_type_statuses():
    ref = torch.zeros(2, 3)
    rep = check_outputs([torch.zeros(3, 2)], [ref], Tolerance())
    assert rep.status == Status.INCORRECT_SHAPE and rep.failed_check == "shape"
    assert "(3, 2) != (2, 3)" in rep.outputs[0].detail
    rep = check_outputs([torch.zeros(2, 3, dtype=torch.float64)], [ref], Tolerance())
    assert rep.status == Status.INCORRECT_DTYPE and rep.failed_check == "dtype"
    rep = check_outputs([ref, ref], [ref], Tolerance())
    assert rep.status == Status.INCORRECT_SHAPE and "2 outputs returned, 1 expected" in rep.outputs[0].detail
    rep = check_outputs([[0.0] * 6], [ref], Tolerance())
    assert rep.status == Status.INCORRECT_SHAPE and rep.failed_check == "type"

    class Sub(torch.Tensor):
        pass

    rep = check_outputs([torch.zeros(2, 3).as_subclass(Sub)], [ref], Tolerance())
    assert rep.status == Status.INCORRECT_SHAPE and "not a plain torch.Tensor" in rep.outputs[0].detail
    # the second output's dtype decides when the first is fine
    rep = check_outputs([ref, torch.zeros(1, dtype=torch.int32)], [ref, torch.zeros(1, dtype=torch.int64)],
                        Tolerance(), names=["a", "b"])
    assert rep.status == Status.INCORRECT_DTYPE and rep.outputs[1].name == "b"


def test_exact_output_passes_with_zero_errors_and_summary():
    ref = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    rep = check_outputs([ref.clone(), ref[0].clone()], [ref, ref[0]], Tolerance(), names=["a", "b"])
    assert rep.passed and rep.status == Status.PASSED and rep.failed_check is None
    s = rep.summary()
    assert s["max_absolute_error"] == 0.0 and s["rel_l2"] == 0.0 and s["write_coverage"] == 1.0
    assert set(rep.figures) == {"a", "b"}


def test_ref_error_widens_scale_limits():
    # an ill-conditioned output: the declared-precision reference itself is 10% off fp64
    oc = check_output("o", torch.ones(4), torch.ones(4), Tolerance(), ref_error=0.1, ref_max_error=0.1)
    assert oc.rel_l2_limit == 0.5  # min(0.5, 8 * 0.1)
    assert oc.norm_max_limit == 1.0  # min(1, 16 * 0.1)


def test_helpers():
    assert rel_l2(torch.zeros(3), torch.zeros(3)) == 0.0
    assert rel_l2(torch.ones(3), torch.zeros(3)) == math.inf
    assert rel_l2(torch.tensor([3.0, 4.0]), torch.tensor([0.0, 0.0]) + torch.tensor([3.0, 0.0])) == pytest.approx(4 / 3)
    assert dtype_eps(torch.bfloat16) == 2**-7 and dtype_eps(torch.int32) == 0.0
    packed = torch.tensor([[0x21, 0xF9]], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    # low nibble first: 0x1 -> 0.5, 0x2 -> 1.0, 0x9 -> -0.5, 0xF -> -6
    assert unpack_fp4(packed).tolist() == [[0.5, 1.0, -0.5, -6.0]]


# ---------------------------------------------------------------- exact and set outputs (issue 13)
from solbench.harness.correctness import OutputSemantics, check_outputs, infer_semantics  # noqa: E402
from solbench.spec import Status  # noqa: E402
from solbench.spec.definition import Definition  # noqa: E402


def test_int64_topk_ids_off_by_one_fail_exactly():
    # ids in [100, 1000): |a-b| = 1 <= 0.01 + 0.01*|b|, so the float rule passes every one
    g = torch.Generator().manual_seed(0)
    ref = torch.randint(100, 1000, (200, 8), generator=g, dtype=torch.int64)
    off = torch.rand(ref.shape, generator=g) < 0.905
    out = ref + off.long()
    rep = check_outputs([out], [ref], Tolerance(), names=["ids"])
    o = rep.outputs[0]
    assert rep.upstream_passed  # what upstream's cast-to-float rule says
    assert not rep.passed and rep.status == Status.INCORRECT_NUMERICAL and rep.failed_check == "exact"
    assert o.matched_ratio == pytest.approx(1 - off.double().mean().item())
    assert check_outputs([ref.clone()], [ref], Tolerance()).passed


def test_exactly_one_integer_or_bool_element_differs():
    ref = torch.arange(1000, dtype=torch.int32)
    out = ref.clone()
    out[417] += 1
    oc = check_output("o", out, ref, Tolerance(max_atol=5, max_rtol=0.5, required_matched_ratio=0.5))
    assert oc.failed_check == "exact" and oc.matched_ratio == pytest.approx(0.999)
    assert oc.detail.startswith("1 of 1000 elements differ")
    bref = torch.zeros(64, dtype=torch.bool)
    bref[::3] = True
    bout = bref.clone()
    bout[10] = ~bout[10]
    oc = check_output("b", bout, bref, Tolerance(required_matched_ratio=0.9))
    assert oc.failed_check == "exact" and oc.matched_ratio == pytest.approx(63 / 64)
    assert check_output("b", bref.clone(), bref, Tolerance()).failed_check is None


def test_one_nan_fails_whatever_the_ratio():
    ref = torch.linspace(1, 2, 1000)
    out = ref.clone()
    out[3] = float("nan")  # 999/1000 matched would pass the ratio
    oc = check_output("o", out, ref, Tolerance(required_matched_ratio=0.5))
    assert oc.failed_check == "nan_inf" and oc.has_nan


def test_exactly_one_element_out_of_tolerance():
    # bound = atol + rtol*|b| = 0.25 + 0.25*1 = 0.5: 1.5 is on the bound (matches), the next
    # float32 above it is not
    ref = torch.ones(100)
    out = ref.clone()
    out[0] = 1.5
    tol = dict(max_atol=0.25, max_rtol=0.25)
    assert check_output("o", out, ref, Tolerance(**tol, required_matched_ratio=1.0)).matched_ratio == 1.0
    out[0] = torch.nextafter(torch.tensor(1.5), torch.tensor(2.0))
    oc = check_output("o", out, ref, Tolerance(**tol, required_matched_ratio=1.0))
    assert oc.matched_ratio == pytest.approx(0.99) and oc.failed_check == "tolerance"
    assert check_output("o", out, ref, Tolerance(**tol, required_matched_ratio=0.99)).upstream_ok


def test_signed_zeros_are_equal():
    ref = torch.tensor([0.0, 0.0, 1.0, -2.0])
    out = torch.tensor([-0.0, -0.0, 1.0, -2.0])
    oc = check_output("o", out, ref, Tolerance(max_atol=0, max_rtol=0, required_matched_ratio=1.0))
    assert oc.failed_check is None and oc.max_abs_error == 0.0
    zref, zout = torch.zeros(8), torch.full((8,), -0.0)
    assert check_output("o", zout, zref, Tolerance(max_atol=0, max_rtol=0)).failed_check is None


def test_infinities():
    ref = torch.arange(200, dtype=torch.float32)
    ref[7] = math.inf
    same = ref.clone()
    # +inf on both sides: no NaN/Inf failure, but no match either: 199/200
    oc = check_output("o", same, ref, Tolerance(required_matched_ratio=0.99))
    assert oc.failed_check is None and oc.matched_ratio == pytest.approx(199 / 200)
    assert check_output("o", same, ref, Tolerance(required_matched_ratio=1.0)).failed_check == "tolerance"
    flipped = ref.clone()
    flipped[7] = -math.inf
    assert check_output("o", flipped, ref, Tolerance(required_matched_ratio=0.5)).failed_check == "nan_inf"
    assert check_output("o", flipped, ref, Tolerance(required_matched_ratio=0.5,
                                                      allow_negative_inf=True)).failed_check == "nan_inf"


def test_empty_outputs():
    ref = torch.empty(0, 4)
    rep = check_outputs([torch.empty(0, 4)], [ref], Tolerance())
    assert rep.passed and rep.outputs[0].numel == 0
    assert check_outputs([torch.empty(0, 5)], [ref], Tolerance()).status == Status.INCORRECT_SHAPE
    assert check_outputs([torch.empty(0, dtype=torch.int64)], [torch.empty(0, dtype=torch.int64)],
                         Tolerance()).passed


def _tied_source():
    # row 0: the 2nd and 3rd largest are tied (5.0 at columns 1 and 4)
    return torch.tensor([[1.0, 5.0, 9.0, 0.0, 5.0, 2.0],
                         [3.0, 8.0, 7.0, 6.0, 1.0, 0.0]], dtype=torch.bfloat16)


def test_topk_ids_with_ties_compare_as_gathered_sets():
    x = _tied_source()
    ref = torch.tensor([[2, 1], [1, 2]])
    sem = {"ids": OutputSemantics("topk", "x")}
    tol = Tolerance()
    # the other tied index, and another order: correct
    ok = torch.tensor([[4, 2], [2, 1]])
    assert check_outputs([ok], [ref], tol, names=["ids"], semantics=sem, inputs={"x": x}).passed
    assert not check_outputs([ok], [ref], tol, names=["ids"]).passed  # exact without the semantics
    for bad, why in ((torch.tensor([[2, 0], [1, 2]]), "a wrong value"),
                     (torch.tensor([[2, 2], [1, 2]]), "a repeated index"),
                     (torch.tensor([[2, 6], [1, 2]]), "out of range"),
                     (torch.tensor([[2, -5], [1, 2]]), "negative")):
        rep = check_outputs([bad], [ref], tol, names=["ids"], semantics=sem, inputs={"x": x})
        assert not rep.passed and rep.failed_check == "index_set", why
        assert rep.outputs[0].matched_ratio == 0.5 and rep.status == Status.INCORRECT_NUMERICAL
    # "set": order-free but the indices themselves must agree
    s = {"ids": OutputSemantics("set")}
    assert check_outputs([torch.tensor([[1, 2], [2, 1]])], [ref], tol, names=["ids"], semantics=s).passed
    assert not check_outputs([ok], [ref], tol, names=["ids"], semantics=s).passed
    with pytest.raises(ValueError, match="topk"):
        check_outputs([ok], [ref], tol, names=["ids"], semantics=sem)


def test_infer_semantics_for_a_topk_reference():
    d = Definition(name="topk", axes={"m": {"type": "var"}, "n": {"type": "const", "value": 64},
                                      "k": {"type": "const", "value": 8}},
                   inputs={"logits": {"shape": ["m", "n"], "dtype": "bfloat16"}},
                   outputs={"values": {"shape": ["m", "k"], "dtype": "bfloat16"},
                            "indices": {"shape": ["m", "k"], "dtype": "int64"}},
                   reference="import torch\ndef run(logits):\n    return torch.topk(logits, 8, dim=-1)\n")
    assert infer_semantics(d) == {"indices": OutputSemantics("topk", "logits")}
    d2 = d.model_copy(update={"reference": "import torch\ndef run(logits):\n    return logits.argsort()[:, :8]\n"})
    assert infer_semantics(d2) == {}


# ---- chunked comparison: the figures do not depend on the chunk size ----

def test_chunked_comparison_hand_worked(monkeypatch):
    """ref = 1..10, out off by 2 at the 7th element, compared 3 elements at a time: 10
    one-element slices, relative L2 2/sqrt(385), the worst slice 2/7, 9 of 10 matched."""
    from solbench.harness import correctness

    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 3)
    ref = torch.arange(1.0, 11.0)
    out = ref.clone()
    out[6] += 2
    oc = check_output("o", out, ref, Tolerance(max_atol=0.5, max_rtol=0.0, required_matched_ratio=0.9))
    assert oc.matched_ratio == 0.9 and oc.max_abs_error == 2.0
    assert oc.max_rel_error == pytest.approx(2 / 7, rel=2**-23)  # computed in float32
    assert oc.rel_l2 == pytest.approx(2 / math.sqrt(385), rel=1e-15)
    assert oc.ref_norm == pytest.approx(math.sqrt(385), rel=1e-15)
    assert oc.worst_slice_rel_l2 == pytest.approx(2 / 7, rel=1e-15)
    assert oc.norm_max_error == 2 / 10


def _cases():
    g = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.float4_e2m1fn_x2):
        for shape in ((65,), (3, 7), (40, 33)):
            if dtype == torch.float4_e2m1fn_x2:
                ref = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
                out = ref.clone()
                out.view(-1)[::5] = 0x77
                yield ref.view(dtype), out.view(dtype)
                continue
            ref = torch.randn(shape, generator=g, dtype=torch.float64) * 10
            out = ref + torch.randn(shape, generator=g, dtype=torch.float64) * 0.01
            if dtype.is_floating_point:
                ref.view(-1)[5], out.view(-1)[5] = -math.inf, -math.inf
                out.view(-1)[-1] = math.nan
            yield ref.to(dtype), out.to(dtype).t().contiguous().t() if len(shape) == 2 else out.to(dtype)


@pytest.mark.parametrize("chunk", [2, 7, 64, 1000])
def test_chunked_figures_equal_the_whole_output_figures(monkeypatch, chunk):
    """Every figure of a comparison in chunks equals (floats to 1e-12 relative) that of one
    comparison of the whole output: floats with NaN and -inf, bf16, a non-contiguous output,
    int64 (exact), packed fp4 (two values a byte: chunks of whole bytes), poisoned buffers."""
    from solbench.harness import correctness

    tol = Tolerance(max_atol=1e-2, max_rtol=1e-2, required_matched_ratio=0.5, allow_negative_inf=True)
    for ref, out in _cases():
        for poisoned in (False, True):
            if poisoned and out.is_contiguous():
                out = out.clone()
                out.reshape(-1)[-3:].view(torch.uint8).fill_(POISON_BYTE)
            monkeypatch.setattr(correctness, "COMPARE_CHUNK", 1 << 25)
            whole = check_output("o", out, ref, tol, poisoned=poisoned).figures()
            monkeypatch.setattr(correctness, "COMPARE_CHUNK", chunk)
            part = check_output("o", out, ref, tol, poisoned=poisoned).figures()
            for k, x in whole.items():
                y = part[k]
                if isinstance(x, float) and not (math.isnan(x) and math.isnan(y)):
                    assert y == pytest.approx(x, rel=1e-12, abs=0), (ref.dtype, tuple(ref.shape), k)
                elif not isinstance(x, float):
                    assert y == x, (ref.dtype, tuple(ref.shape), k)


def test_comparison_temporaries_stay_within_a_chunk(monkeypatch):
    """No tensor the comparison makes holds more than a chunk's elements (the checks of an
    18.8 GB workload once ran the harness out of device memory): every aten op's outputs are
    watched while an output of 40 chunks is compared; so are rel_l2's and norm_max_error's."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from solbench.harness import correctness
    from solbench.harness.correctness import norm_max_error

    chunk = 1000
    monkeypatch.setattr(correctness, "COMPARE_CHUNK", chunk)
    largest = [0]

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > 0 and all(
                        t.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
                        for a in args if isinstance(a, torch.Tensor)):
                    # a new allocation (views and slices share their operands' storages)
                    largest[0] = max(largest[0], t.numel())
            return out

    ref = torch.randn(200, 200)
    out = (ref + 1e-3 * torch.randn(200, 200)).to(torch.bfloat16)
    ref = ref.to(torch.bfloat16)
    truth = ref.double()
    with Watch():
        oc = check_output("o", out, ref, Tolerance(max_atol=1e-2, max_rtol=1e-2), poisoned=True)
        e = rel_l2(out, truth)
        m = norm_max_error(out, truth)
    assert oc.numel == 40_000 and 0 < oc.rel_l2 == pytest.approx(e, rel=1e-12) and m > 0
    assert 0 < largest[0] <= chunk


def test_chunked_norms_keep_a_nan_beside_an_infinity(monkeypatch):
    """A NaN in one chunk and an infinity in another: the norm is NaN, as one norm over the
    whole is (math.hypot(nan, inf) is inf: the reference's own error would have read as
    infinite and widened the relative-L2 limit to its cap, passing a 9%-off candidate)."""
    from solbench.harness import correctness

    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 4)
    ref = torch.ones(12, dtype=torch.float64)
    out = ref.clone()
    out[0], out[11] = math.nan, math.inf
    assert math.isnan(rel_l2(out, ref))
    with pytest.raises(ValueError, match="shapes differ"):
        rel_l2(out[:3], ref[:1])


def test_noncontiguous_packed_fp4_is_compared_by_its_bytes(monkeypatch):
    """torch cannot copy float4_e2m1fn_x2: a transposed fp4 output is flattened through its
    bytes, and compared like its contiguous copy (chunks of 1 and 2 elements too)."""
    from solbench.harness import correctness

    g = torch.Generator().manual_seed(5)
    raw = torch.randint(0, 256, (8, 6), dtype=torch.uint8, generator=g)
    ref = raw.t().view(torch.float4_e2m1fn_x2)  # non-contiguous
    want = raw.t().contiguous().view(torch.float4_e2m1fn_x2)
    for chunk in (1, 2, 1 << 25):
        monkeypatch.setattr(correctness, "COMPARE_CHUNK", chunk)
        oc = check_output("o", ref, want, Tolerance(max_atol=0.0, max_rtol=0.0), poisoned=True)
        assert oc.ok and oc.matched_ratio == 1.0 and oc.rel_l2 == 0.0


def test_misses_say_where_the_failing_elements_lie(monkeypatch):
    """A [4, 8] output (32 elements, one slice each) wrong at rows 1 and 2 from column 6 of
    row 1 to column 1 of row 2 (flat 14..17), by 1, 2, 3, 4; compared 5 elements at a time,
    so the misses straddle chunks 10..14 and 15..19. Worked by hand: 4 misses, the first at
    [1, 6], the last at [2, 1], the largest error (4) at [2, 1] (flat 17) with 17 + 4 against 17."""
    from solbench.harness import correctness

    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 5)
    ref = torch.arange(32.0).reshape(4, 8)
    out = ref.clone()
    out.view(-1)[14:18] += torch.tensor([1.0, 2.0, 3.0, 4.0])
    oc = check_output("y", out, ref, Tolerance(max_atol=0.5, max_rtol=0.0, required_matched_ratio=0.99))
    assert oc.failed_check == "tolerance" and oc.matched_ratio == 28 / 32
    m = oc.misses
    assert m["elements"] == 4 and m["of"] == 32
    assert m["first"] == [1, 6] and m["last"] == [2, 1]
    assert m["slice_elements"] == 1 and m["by_slice"] == [0] * 14 + [1] * 4 + [0] * 14
    assert m["largest_error"] == {"index": [2, 1], "candidate": 17.0 + 4.0, "reference": 17.0}
    # 64 slices of a [2, 100] output: slice_len ceil(200/64) = 4; misses at 0 and 199
    ref = torch.zeros(2, 100)
    out = ref.clone()
    out[0, 0], out[1, 99] = 1.0, -3.0
    m = check_output("y", out, ref, Tolerance(max_atol=0.5, max_rtol=0.0)).misses
    assert m["first"] == [0, 0] and m["last"] == [1, 99] and m["slice_elements"] == 4
    assert m["by_slice"][0] == 1 and m["by_slice"][199 // 4] == 1 and sum(m["by_slice"]) == 2
    assert m["largest_error"] == {"index": [1, 99], "candidate": -3.0, "reference": 0.0}
    # a passing output records none
    assert check_output("y", ref, ref, Tolerance(max_atol=0.5, max_rtol=0.0)).misses is None
    oc = check_output("y", out, ref, Tolerance(max_atol=0.5, max_rtol=0.0, required_matched_ratio=1.0))
    assert oc.detail.endswith("; largest error at [1, 99]: -3 against 0"), oc.detail


def test_misses_of_an_all_nan_output_name_no_largest_error():
    """Every element NaN: no finite error to name; the misses span the output."""
    ref = torch.ones(3, 5)
    m = check_output("y", torch.full((3, 5), math.nan), ref, Tolerance(max_atol=0.5, max_rtol=0.0)).misses
    assert m["elements"] == 15 and m["first"] == [0, 0] and m["last"] == [2, 4]
    assert "largest_error" not in m


def test_a_finite_chunk_is_read_from_the_device_once(monkeypatch):
    """The figures of a chunk whose values are all finite (the counts of poisoned and of
    differing elements included) come back in one read (on CUDA each read is a
    synchronisation): one ``tolist`` and no scalar read, counted at the dispatcher
    (``aten::_local_scalar_dense`` is every host read of a scalar, those torch makes itself
    from a 0-d index included). A chunk with a miss reads its positions (first, last, its
    slices' counts) besides, and one with a NaN takes a second ``tolist`` for its masks. The
    figures are those worked by hand: 3 chunks of 4 elements, one error of 0.5 at index 5
    (tolerance 0.1), so 11 of 12 match and the largest error is there."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from solbench.harness import correctness

    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 4)
    reads = []
    tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append("tolist") or tolist(t))

    class Reads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._local_scalar_dense.default:
                reads.append("scalar")
            return func(*args, **(kwargs or {}))

    tol = Tolerance(max_atol=0.1, max_rtol=0.0)
    ref = torch.arange(12, dtype=torch.float32)
    with Reads():
        st = correctness._compare_chunked(ref.clone(), ref, tol, poisoned=True)
    assert reads == ["tolist"] * 3
    assert (st.matched, st.n, st.unwritten, st.max_abs) == (12, 12, 0, 0.0)
    reads.clear()
    out = ref.clone()
    out[5] += 0.5
    with Reads():
        st = correctness._compare_chunked(out, ref, tol, poisoned=True)
    # the chunk 4..7 with the miss: its first and last (2) and its 4 one-element slices' counts
    assert reads.count("tolist") == 3 and reads.count("scalar") == 2 + 4
    assert (st.matched, st.n, st.unwritten) == (11, 12, 0)
    assert st.worst == (5, 5.5, 5.0) and st.max_abs == 0.5
    assert (st.first_miss, st.last_miss) == (5, 5)
    reads.clear()
    out = ref.clone()
    out[9] = math.nan  # chunk 8..11: the sums are NaN, the masked path reads again
    st = correctness._compare_chunked(out, ref, tol, poisoned=False)
    assert reads.count("tolist") == 3 + 1
    assert st.has_nan and st.bad_special and st.matched == 11


# ---- every figure against one whole-tensor computation, made independently ----

def _whole_tensor_figures(out, ref, tol, poisoned):
    """The figures of ``_compare_chunked`` computed over the whole flattened output at once,
    masks always applied, as the rules state them (no chunks, no finite-first path)."""
    from solbench.harness import correctness as c

    a, b = c._as_float(out.reshape(-1)), c._as_float(ref.reshape(-1))
    fin = torch.isfinite(a) & torch.isfinite(b)
    af, bf = torch.where(fin, a, 0), torch.where(fin, b, 0)
    diff = (af - bf).abs()
    lim = bf.abs() * tol.max_rtol + tol.max_atol
    both_ninf = (a == -math.inf) & (b == -math.inf) if tol.allow_negative_inf else torch.zeros_like(fin)
    matched = ((diff <= lim) & fin) | both_ninf
    bad = (torch.isnan(a) | torch.isinf(a)) & ~both_ninf
    same = (torch.isnan(a) & torch.isnan(b)) | (torch.isinf(a) & (a == b))
    k = int(diff.argmax())
    miss = (~matched).nonzero().reshape(-1).tolist()
    e = dict(matched=int(matched.sum()), max_abs=float(diff.max()), b_max=float(bf.abs().max()),
             max_rel=float((diff / bf.abs().clamp_min(1e-12)).max()), worst=(k, float(a[k]), float(b[k])),
             has_nan=bool(torch.isnan(a).any()), has_inf=bool(torch.isinf(a).any()),
             bad_special=bool((bad & ~same).any()), a_all_zero=bool((a == 0).all()),
             first_miss=miss[0] if miss else -1, last_miss=miss[-1] if miss else -1)
    n = a.numel()
    slice_len = -(-n // min(64, n))
    e["miss_slices"] = [sum(1 for i in miss if i // slice_len == s) for s in range(min(64, n))]
    if c.is_exact_dtype(ref.dtype):
        e["n_diff"] = int((out != ref).sum())
    if poisoned:
        pb = c._poison_bits(out.dtype)
        e["unwritten"] = int(((c._bits(out) == pb) & (c._bits(ref) != pb)).sum())
    norms = (float(torch.linalg.vector_norm(af.double() - bf.double())), float(torch.linalg.vector_norm(bf.double())))
    return e, norms


def _random_case(rng, g):
    """(out, ref, tol, poisoned) drawn with ``rng`` (random.Random) and ``g`` (torch)."""
    dt = rng.choice([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.bool])
    n = rng.choice([1, 2, 7, 64, 65, 130])
    ref = torch.randn(n, generator=g, dtype=torch.float64) * 10 ** rng.uniform(-3, 3)
    if rng.random() < 0.3:
        ref[: rng.randrange(n + 1)] = 3e38  # finite, but a float32 sum of them overflows
    out = ref + torch.randn(n, generator=g, dtype=torch.float64) * rng.choice([0.0, 1e-4, 1e-1, 10.0])
    for t in (out, ref):
        for _ in range(rng.choice([0, 0, 1, 3])):
            t[rng.randrange(n)] = rng.choice([math.nan, math.inf, -math.inf, -0.0, 1e-45])
    if rng.random() < 0.3:
        i = rng.randrange(n)
        out[i] = ref[i] = rng.choice([math.nan, math.inf, -math.inf])
    if rng.random() < 0.1:
        out.zero_()
    if dt == torch.bool:
        out, ref = out > 0, ref > 0
    elif dt == torch.int64:
        out = torch.nan_to_num(out, 0.0, 1e15, -1e15).clamp(-1e15, 1e15).to(dt) + 2 ** 40
        ref = torch.nan_to_num(ref, 0.0, 1e15, -1e15).clamp(-1e15, 1e15).to(dt) + 2 ** 40
    else:
        out, ref = out.to(dt), ref.to(dt)
    poisoned = rng.random() < 0.5
    if poisoned and rng.random() < 0.5:
        out.view(torch.uint8)[rng.randrange(n) * out.element_size():] = POISON_BYTE
    tol = Tolerance(max_atol=rng.choice([0.0, 1e-3, 1.0]), max_rtol=rng.choice([0.0, 1e-2]),
                    allow_negative_inf=rng.random() < 0.5)
    return out, ref, tol, poisoned


def _same_or_both_nan(x, w):
    if isinstance(w, tuple):
        return len(x) == len(w) and all(p == q or _same_or_both_nan(p, q) for p, q in zip(x, w))
    return x == w or (isinstance(w, float) and math.isnan(w) and math.isnan(x))


@pytest.mark.parametrize("seed", range(12))
def test_chunked_figures_equal_a_whole_tensor_computation(seed):
    """Random outputs of every kind of dtype (float32/16, bf16, float64, int64 ids above
    2**40, bool) with NaN, infinities, -0.0, subnormals, all zeros, finite values whose
    float32 sum overflows, poisoned tails and -inf allowances, compared in chunks of 1 to
    2**25 elements: every figure equals that of one whole-tensor computation with the masks
    always applied (norms to 1e-12 relative, the rest exactly)."""
    import random

    from solbench.harness import correctness as c

    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    for _ in range(25):
        out, ref, tol, poisoned = _random_case(rng, g)
        st = c._compare_chunked(out, ref, tol, poisoned, rng.choice([1, 2, 3, 5, 64, 1 << 25]))
        want, norms = _whole_tensor_figures(out, ref, tol, poisoned)
        for key, w in want.items():
            assert _same_or_both_nan(getattr(st, key), w), (key, getattr(st, key), w, seed)
        assert c._norm_of(st.d_norms) == pytest.approx(norms[0], rel=1e-12, nan_ok=True)
        assert c._norm_of(st.b_norms) == pytest.approx(norms[1], rel=1e-12, nan_ok=True)
