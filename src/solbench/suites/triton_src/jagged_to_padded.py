"""Triton candidate: jagged -> padded dense. One program per (sequence, BLOCK_L positions):
copies rows that exist, writes zeros for padding, drops rows past max_len. Not DPS."""

import torch
import triton
import triton.language as tl


@triton.jit
def _j2p_kernel(values_ptr, offsets_ptr, out_ptr, D, MAX_LEN,
                BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < D
    start = tl.load(offsets_ptr + b)
    length = tl.load(offsets_ptr + b + 1) - start
    have = p < length
    v = tl.load(values_ptr + (start + p)[:, None] * D + cols[None, :],
                mask=have[:, None] & cmask[None, :], other=0.0)
    pmask = p < MAX_LEN
    tl.store(out_ptr + (b * MAX_LEN + p)[:, None] * D + cols[None, :], v,
             mask=pmask[:, None] & cmask[None, :])


def run(values, offsets, max_len):
    d = values.shape[1]
    b = offsets.numel() - 1
    out = torch.empty((b, max_len, d), device=values.device, dtype=values.dtype)
    block_d = triton.next_power_of_2(d)
    block_l = max(1, min(64, 4096 // block_d))
    _j2p_kernel[(b, triton.cdiv(max_len, block_l))](values, offsets, out, d, max_len,
                                                    BLOCK_L=block_l, BLOCK_D=block_d)
    return out
