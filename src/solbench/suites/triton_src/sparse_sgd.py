"""Triton candidate: sparse SGD on the touched rows: out[i] = weight[ids[i]] - lr * grad[i].

BLOCK_R rows x BLOCK_D columns per program; int64 row offsets into the table. Not DPS.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _sgd_kernel(weight_ptr, ids_ptr, grad_ptr, out_ptr, U, D, lr,
                BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_D)
    rmask = r < U
    m = rmask[:, None] & (cols < D)[None, :]
    row = tl.load(ids_ptr + r, mask=rmask, other=0).to(tl.int64)
    w = tl.load(weight_ptr + row[:, None] * D + cols[None, :], mask=m, other=0.0)
    g = tl.load(grad_ptr + r[:, None] * D + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + r[:, None] * D + cols[None, :], w - lr * g, mask=m)


def run(weight, unique_indices, grad, lr):
    u, d = grad.shape
    out = torch.empty_like(grad)
    block_d = triton.next_power_of_2(d)
    block_r = max(1, 4096 // block_d)
    _sgd_kernel[(triton.cdiv(u, block_r),)](weight, unique_indices, grad, out, u, d, lr,
                                            BLOCK_R=block_r, BLOCK_D=block_d)
    return out
