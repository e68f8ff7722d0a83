"""Real-tensor counting: stand-ins (one value broadcast) propagate exactly through pointwise
ops and constant-mask writes."""

from __future__ import annotations

import torch

from solbench.sol.counting import _constant_mask_write, _constant_pointwise, _is_stand_in

aten = torch.ops.aten


def _si(value, shape, dtype=torch.float32):
    return torch.tensor(value, dtype=dtype).expand(shape)


def test_pointwise_on_stand_ins_is_exact_and_stays_a_stand_in():
    x = _si(2.5, (1000, 1000))
    m = _constant_pointwise(aten.gt.Scalar, (x, 1.0), {})
    assert _is_stand_in(m) and m.dtype == torch.bool and m.shape == x.shape and bool(m[3, 7])
    both = _constant_pointwise(aten.bitwise_and.Tensor, (m, _constant_pointwise(aten.lt.Scalar, (x, 2.0), {})), {})
    assert _is_stand_in(both) and not bool(both[0, 0])          # 2.5 > 1 and 2.5 < 2 is False
    y = _constant_pointwise(aten.mul.Tensor, (x, torch.tensor(4.0)), {})
    assert _is_stand_in(y) and float(y[999, 999]) == 10.0
    # a real (non-constant) operand: not applicable
    assert _constant_pointwise(aten.mul.Tensor, (x, torch.randn(1000, 1000)), {}) is None
    # not pointwise: not applicable
    assert _constant_pointwise(aten.sum.default, (x,), {}) is None


def test_constant_mask_write_is_a_fill_or_nothing():
    r = torch.zeros(300, 400, dtype=torch.uint8)
    on, off = _si(True, (300, 400), torch.bool), _si(False, (300, 400), torch.bool)
    out = _constant_mask_write(aten.index_put_.default, (r, [off], torch.tensor(7, dtype=torch.uint8)), {}, True)
    assert out is r and int(r.sum()) == 0
    out = _constant_mask_write(aten.index_put_.default, (r, [on], torch.tensor(7, dtype=torch.uint8)), {}, True)
    assert out is r and bool((r == 7).all())
    f = _constant_mask_write(aten.masked_fill.Scalar, (r, off, 3), {}, False)
    assert f is not r and bool((f == 7).all())


def test_the_large_result_decision_is_remembered_per_signature_only():
    """_large_result sizes a call on the meta device once per signature (shapes, strides,
    offset, dtype, other arguments); a call that differs in any of them is sized again."""
    from solbench.sol.counting import _NOT_LARGE, STAND_IN_BYTES, _large_result, _meta_key

    small = torch.zeros(256, 256)
    assert _large_result(aten.mul.Tensor, (small, small), {}) is None
    assert _meta_key(aten.mul.Tensor, (small, small), {}) in _NOT_LARGE
    assert _large_result(aten.mul.Tensor, (small, small), {}) is None  # remembered
    # the same numel at another stride, or another dtype, is another signature
    assert _meta_key(aten.mul.Tensor, (small.t(), small), {}) != _meta_key(aten.mul.Tensor, (small, small), {})
    assert _meta_key(aten.mul.Tensor, (small.double(), small), {}) != _meta_key(aten.mul.Tensor, (small, small), {})
    # 16M fp32 elements by expand (no memory): the result of the add is 64 MiB, a stand-in, every time
    n = STAND_IN_BYTES // 4
    big = torch.zeros(1).expand(n)
    for _ in range(2):
        out = _large_result(aten.add.Tensor, (big, 1.0), {})
        assert out is not None and _is_stand_in(out) and out.shape == (n,)
    # a factory call: randperm(256) is small (sized once), randn of 64 MiB is not
    assert _large_result(aten.randperm.default, (256,), {"device": torch.device("cpu")}) is None
    r = _large_result(aten.randn.default, ([n],), {"device": torch.device("cpu")})
    assert r is not None and _is_stand_in(r)
