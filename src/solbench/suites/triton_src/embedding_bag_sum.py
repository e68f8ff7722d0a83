"""Triton candidate: embedding-bag forward, sum pooling (optionally per-sample weighted).

One program per (bag, block of D columns). The program walks its bag BLOCK_N ids at a
time, gathers those rows as a [BLOCK_N, BLOCK_D] tile (int64 row offsets), accumulates in
fp32 and stores once in the table's dtype. Empty bags store zeros. Destination-passing:
``run(weight, indices, offsets[, per_sample_weights], pooled)``.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _embedding_bag_kernel(weight_ptr, indices_ptr, offsets_ptr, psw_ptr, out_ptr, D,
                          HAS_PSW: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_D: tl.constexpr):
    bag = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    start = tl.load(offsets_ptr + bag)
    end = tl.load(offsets_ptr + bag + 1)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for j0 in range(start, end, BLOCK_N):
        jj = j0 + tl.arange(0, BLOCK_N)
        jmask = jj < end
        idx = tl.load(indices_ptr + jj, mask=jmask, other=0).to(tl.int64)
        rows = tl.load(weight_ptr + idx[:, None] * D + cols[None, :],
                       mask=jmask[:, None] & cmask[None, :], other=0.0).to(tl.float32)
        if HAS_PSW:
            w = tl.load(psw_ptr + jj, mask=jmask, other=0.0).to(tl.float32)
            rows = rows * w[:, None]
        acc += tl.sum(rows, axis=0)
    tl.store(out_ptr + bag * D + cols, acc.to(out_ptr.dtype.element_ty), mask=cmask)


def run(weight, indices, offsets, *rest):
    if len(rest) == 2:
        per_sample_weights, pooled = rest
    else:
        per_sample_weights, pooled = None, rest[0]
    d = weight.shape[1]
    batch = offsets.numel() - 1
    block_d = min(triton.next_power_of_2(d), 128)
    grid = (batch, triton.cdiv(d, block_d))
    psw = per_sample_weights if per_sample_weights is not None else indices
    _embedding_bag_kernel[grid](
        weight, indices, offsets, psw, pooled, d,
        HAS_PSW=per_sample_weights is not None, BLOCK_N=16, BLOCK_D=block_d,
    )
    return pooled
