"""Triton candidate: inclusive cumsum along dim 1 of x [B, L]. One program per row: a
tl.cumsum scan of each BLOCK-wide chunk plus the running carry of the chunks before it,
fp32 math. Not DPS."""

import torch
import triton
import triton.language as tl


@triton.jit
def _cumsum_kernel(x_ptr, y_ptr, L, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.zeros([1], dtype=tl.float32)
    for c0 in range(0, L, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        m = c < L
        x = tl.load(x_ptr + row * L + c, mask=m, other=0.0).to(tl.float32)
        s = tl.cumsum(x, axis=0) + carry
        tl.store(y_ptr + row * L + c, s.to(y_ptr.dtype.element_ty), mask=m)
        carry += tl.sum(x, axis=0)


def run(x):
    b, l = x.shape
    y = torch.empty_like(x)
    _cumsum_kernel[(b,)](x, y, l, BLOCK=min(2048, triton.next_power_of_2(l)))
    return y
