"""Triton candidate: DLRM dot-product interaction forward.

One program per sample: T = [dense; sparse] as a zero-padded [32, BLOCK_D] tile, Z = T T^T
with tl.dot in IEEE fp32 (never TF32; bf16 inputs are widened to fp32 first, so their
products are exact and accumulate in fp32), then the
strictly-lower triangle is stored at i*(i-1)/2 + j after the dense copy. Not DPS.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _interaction_kernel(dense_ptr, sparse_ptr, out_ptr, S, D, OUT_DIM,
                        FP: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    f = tl.arange(0, FP)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < D
    dense = tl.load(dense_ptr + b * D + cols, mask=cmask, other=0.0)
    is_sparse = (f >= 1) & (f <= S)
    sp = tl.load(sparse_ptr + b * S * D + (f[:, None] - 1) * D + cols[None, :],
                 mask=is_sparse[:, None] & cmask[None, :], other=0.0)
    t = tl.where((f == 0)[:, None], dense[None, :], sp)
    tf = t.to(tl.float32)
    z = tl.dot(tf, tl.trans(tf), input_precision="ieee")
    out_row = out_ptr + b * OUT_DIM
    tl.store(out_row + cols, dense, mask=cmask)
    i = f[:, None]
    j = f[None, :]
    tri = (j < i) & (i <= S)
    tl.store(out_row + D + (i * (i - 1)) // 2 + j, z.to(out_ptr.dtype.element_ty), mask=tri)


def run(dense, sparse):
    b, d = dense.shape
    s = sparse.shape[1]
    f = s + 1
    out_dim = d + f * (f - 1) // 2
    out = torch.empty((b, out_dim), device=dense.device, dtype=dense.dtype)
    fp = max(16, triton.next_power_of_2(f))
    _interaction_kernel[(b,)](dense, sparse, out, s, d, out_dim, FP=fp,
                              BLOCK_D=max(16, triton.next_power_of_2(d)))
    return out
