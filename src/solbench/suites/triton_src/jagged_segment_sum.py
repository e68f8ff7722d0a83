"""Triton candidate: jagged segment sum. One program per (segment, BLOCK_D columns),
walking the segment BLOCK_N rows at a time, fp32 accumulation; empty segments store 0.
Not DPS."""

import torch
import triton
import triton.language as tl


@triton.jit
def _segsum_kernel(values_ptr, offsets_ptr, out_ptr, D,
                   BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    start = tl.load(offsets_ptr + b)
    end = tl.load(offsets_ptr + b + 1)
    acc = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    for j0 in range(start, end, BLOCK_N):
        jj = j0 + tl.arange(0, BLOCK_N)
        m = (jj < end)[:, None] & cmask[None, :]
        acc += tl.load(values_ptr + jj[:, None] * D + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + b * D + cols, tl.sum(acc, axis=0), mask=cmask)


def run(values, offsets):
    d = values.shape[1]
    b = offsets.numel() - 1
    out = torch.empty((b, d), device=values.device, dtype=values.dtype)
    block_d = min(128, triton.next_power_of_2(d))
    _segsum_kernel[(b, triton.cdiv(d, block_d))](values, offsets, out, d,
                                                 BLOCK_N=16, BLOCK_D=block_d)
    return out
