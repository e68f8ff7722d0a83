"""Triton candidate: jagged softmax (per segment, per column). One program per (segment,
BLOCK_D columns): an online max/sum pass over the segment, then a pass that writes
exp(x - max) / sum. Not DPS."""

import torch
import triton
import triton.language as tl


@triton.jit
def _jsoftmax_kernel(values_ptr, offsets_ptr, out_ptr, D,
                     BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    start = tl.load(offsets_ptr + b)
    end = tl.load(offsets_ptr + b + 1)
    mx = tl.full([BLOCK_D], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_D], dtype=tl.float32)
    for j0 in range(start, end, BLOCK_N):
        jj = j0 + tl.arange(0, BLOCK_N)
        m = (jj < end)[:, None] & cmask[None, :]
        x = tl.load(values_ptr + jj[:, None] * D + cols[None, :], mask=m,
                    other=float("-inf"))
        new_mx = tl.maximum(mx, tl.max(x, axis=0))
        safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
        s = s * tl.exp(mx - safe) + tl.sum(tl.exp(x - safe[None, :]), axis=0)
        mx = new_mx
    for j0 in range(start, end, BLOCK_N):
        jj = j0 + tl.arange(0, BLOCK_N)
        m = (jj < end)[:, None] & cmask[None, :]
        x = tl.load(values_ptr + jj[:, None] * D + cols[None, :], mask=m, other=0.0)
        y = tl.exp(x - mx[None, :]) / s[None, :]
        tl.store(out_ptr + jj[:, None] * D + cols[None, :], y, mask=m)


def run(values, offsets):
    d = values.shape[1]
    b = offsets.numel() - 1
    out = torch.empty_like(values)
    block_d = min(128, triton.next_power_of_2(d))
    _jsoftmax_kernel[(b, triton.cdiv(d, block_d))](values, offsets, out, d,
                                                   BLOCK_N=16, BLOCK_D=block_d)
    return out
