"""Per-signature memos of the counting modes: a short-circuited tensor-core op's meta output is
reused only for a call of the same signature, and the record of a call whose signature differs
in one field (dtype, strides, a scalar's type) is the one a fresh computation gives."""

from __future__ import annotations

import torch

from solbench.sol.counting import _META_OUT, _MMA_FLOPS, Counts, _CountingMode, _sig_key

aten = torch.ops.aten


def _fill(k, shape, dtype):
    # _fake_output's fill k, computed independently: 0.1 x N(0, 1) from a generator seeded k
    return torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(k)).mul_(0.1)


def test_signature_key_tells_apart_dtype_strides_offset_and_scalar_type():
    a = torch.zeros(4, 8)
    b = torch.zeros(8, 16)
    key = _sig_key(aten.mm.default, (a, b), {})
    assert key == _sig_key(aten.mm.default, (torch.ones(4, 8), torch.ones(8, 16)), {})  # values: no
    assert key != _sig_key(aten.mm.default, (a.half(), b.half()), {})                  # dtype
    assert key != _sig_key(aten.mm.default, (torch.zeros(8, 4).t(), b), {})            # strides (1, 4)
    assert key != _sig_key(aten.mm.default, (torch.zeros(5, 8)[1:], b), {})            # offset 8
    # without offsets (the fake-output memo's key), a view starting elsewhere is the same call
    assert _sig_key(aten.mm.default, (torch.zeros(5, 8)[1:], b), {}, offsets=False) == \
        _sig_key(aten.mm.default, (a, b), {}, offsets=False)
    t = torch.zeros(3, dtype=torch.int64)
    # 1 == 1.0 == True in Python, but int64 * 1 is int64, * 1.0 float32
    assert _sig_key(aten.mul.Scalar, (t, 1), {}) != _sig_key(aten.mul.Scalar, (t, 1.0), {})
    assert _sig_key(aten.mul.Scalar, (t, 1), {}) != _sig_key(aten.mul.Scalar, (t, True), {})


def test_fake_output_memo_gives_what_a_fresh_meta_run_gives():
    _META_OUT.clear()
    mode = _CountingMode(Counts(), short_circuit=True)
    a, b = torch.zeros(4, 8), torch.zeros(8, 16)
    out, unfilled = mode._fake_output(aten.mm.default, (a, b), {})   # fill 0, meta run
    assert len(_META_OUT) == 1 and not unfilled
    assert out.shape == (4, 16) and out.dtype == torch.float32 and torch.equal(out, _fill(0, (4, 16), torch.float32))
    # same shapes, fp16: another signature, so a fresh meta run and an fp16 result (fill 1)
    out, _ = mode._fake_output(aten.mm.default, (a.half(), b.half()), {})
    assert len(_META_OUT) == 2
    assert out.dtype == torch.float16 and torch.equal(out, _fill(1, (4, 16), torch.float16))
    # the first signature again: a memo hit, and the fill counter still moves (fill 2)
    out, _ = mode._fake_output(aten.mm.default, (torch.ones(4, 8), torch.ones(8, 16)), {})
    assert len(_META_OUT) == 2
    assert out.dtype == torch.float32 and torch.equal(out, _fill(2, (4, 16), torch.float32))
    # a view at another offset (the rows 1-4 of a 5x8 buffer): a memo hit, the same shape (fill 3)
    out, _ = mode._fake_output(aten.mm.default, (torch.zeros(5, 8)[1:], b), {})
    assert len(_META_OUT) == 2
    assert out.shape == (4, 16) and torch.equal(out, _fill(3, (4, 16), torch.float32))
    # the transposed operand (strides 1, 4): another signature, the same shape (fill 4)
    out, _ = mode._fake_output(aten.mm.default, (torch.zeros(8, 4).t(), b), {})
    assert len(_META_OUT) == 3
    assert out.shape == (4, 16) and torch.equal(out, _fill(4, (4, 16), torch.float32))
    # an int64 tensor times 1 (int64: zeros, no fill) and times 1.0 (float32: fill 3)
    t = torch.arange(3)
    out, _ = mode._fake_output(aten.mul.Scalar, (t, 1), {})
    assert out.dtype == torch.int64 and torch.equal(out, torch.zeros(3, dtype=torch.int64))
    out, _ = mode._fake_output(aten.mul.Scalar, (t, 1.0), {})
    assert out.dtype == torch.float32 and torch.equal(out, _fill(5, (3,), torch.float32))


def test_counts_of_repeated_and_differing_signatures_match_hand_values():
    """Two fp32 products, one fp16 product and one with a transposed operand, all 4x8 @ 8x16:
    2*4*8*16 = 1024 FLOP each; bytes moved (a + b + out) = (32 + 128 + 64) elements, x4 for
    fp32 (896 B) and x2 for fp16 (448 B)."""
    _META_OUT.clear()
    c = Counts()
    a, b = torch.randn(4, 8), torch.randn(8, 16)
    at = torch.randn(8, 4).t()
    with _CountingMode(c, short_circuit=True):
        o1 = torch.mm(a, b)
        o2 = torch.mm(a, b)
        o3 = torch.mm(a.half(), b.half())   # the casts are counted too: 32 + 128 elements, 4 B in, 2 B out
        o4 = torch.mm(at, b)
    assert [o.dtype for o in (o1, o2, o3, o4)] == [torch.float32] * 2 + [torch.float16] + [torch.float32]
    assert all(o.shape == (4, 16) for o in (o1, o2, o3, o4))
    assert not torch.equal(o1, o2)  # fills 0 and 1: a memo hit does not reuse values
    assert c.mma_flops == {"fp32": 3 * 1024, "fp16": 1024}
    assert c.op_counts["mm"] == 4
    casts = (32 + 128) * (4 + 2)
    assert c.bytes_unfused == 3 * 896 + 448 + casts


def test_op_info_reads_schema_tags_and_tables():
    """The per-op facts the dispatch path looks up once per op, against the schemas by hand:
    add_ writes its self (argument 0), copy_ too; mm is short-circuited tensor-core work; view
    is a view; mul is pointwise with its elementwise entry (1 FLOP per output element)."""
    from solbench.sol import ops as optab
    from solbench.sol.counting import _op_info, _packet

    add_ = _op_info(aten.add_.Tensor)
    assert add_.name == "add" == _packet(aten.add_.Tensor) and add_.written == [0] and add_.writes0
    assert _op_info(aten.add_.Tensor) is add_  # computed once
    assert _op_info(aten.copy_.default).written == [0]
    mm = _op_info(aten.mm.default)
    assert mm.short and mm.mma and not mm.view and mm.written == [] and not mm.writes0
    assert _op_info(aten.view.default).view and not _op_info(aten.view.default).mma
    mul = _op_info(aten.mul.Tensor)
    assert mul.pointwise and mul.elem == optab.ELEMENTWISE["mul"] == (1.0, 0.0, "out")
    assert not mul.short and not mul.mma and mul.written == []


def test_memoised_conv_flops_match_hand_values_for_each_signature():
    """FLOPs of a short-circuited conv come from flop_counter's formula once per signature
    (:data:`_MMA_FLOPS`). By hand, x 1x2x5x5, w 3x2x3x3: without padding the output is 1x3x3x3
    (27 elements x 2*3*3 MACs each x 2 FLOP = 972); with padding 1 it is 1x3x5x5 (75 x 18 x 2 =
    2700). Twice each: the second call of a signature is a memo hit, and the totals are the
    sums of the hand values."""
    _META_OUT.clear()
    _MMA_FLOPS.clear()
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    c = Counts()
    with _CountingMode(c, short_circuit=True):
        o1 = torch.nn.functional.conv2d(x, w)
    assert c.mma_flops == {"fp32": 972} and len(_MMA_FLOPS) == 1
    with _CountingMode(c, short_circuit=True):
        torch.nn.functional.conv2d(x, w)
        o3 = torch.nn.functional.conv2d(x, w, padding=1)
        torch.nn.functional.conv2d(x, w, padding=1)
    assert len(_MMA_FLOPS) == 2  # one entry per signature; the repeats were hits
    assert o1.shape == (1, 3, 3, 3) and o3.shape == (1, 3, 5, 5)
    assert c.mma_flops == {"fp32": 2 * 972 + 2 * 2700}
    assert c.mma_flops_full == c.mma_flops and c.op_counts["convolution"] == 4
    # the same calls counted with the memo emptied before each: the same totals
    c2 = Counts()
    for pad in (0, 0, 1, 1):
        _MMA_FLOPS.clear()
        with _CountingMode(c2, short_circuit=True):
            torch.nn.functional.conv2d(x, w, padding=pad)
    assert c2.mma_flops == c.mma_flops
