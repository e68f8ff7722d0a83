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
