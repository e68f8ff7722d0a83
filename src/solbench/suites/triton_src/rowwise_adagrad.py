"""Triton candidate: row-wise Adagrad on the touched rows (FBGEMM EXACT_ROWWISE_ADAGRAD).

m' = m[id] + mean(g^2); w' = w[id] - lr * g / (sqrt(m') + eps), with IEEE sqrt. BLOCK_R
rows per program, the whole row (BLOCK_D >= D) in registers. Not DPS.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _adagrad_kernel(weight_ptr, mom_ptr, ids_ptr, grad_ptr, out_w_ptr, out_m_ptr, U, D,
                    lr, eps, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_D)
    rmask = r < U
    m = rmask[:, None] & (cols < D)[None, :]
    row = tl.load(ids_ptr + r, mask=rmask, other=0).to(tl.int64)
    g = tl.load(grad_ptr + r[:, None] * D + cols[None, :], mask=m, other=0.0)
    new_m = tl.load(mom_ptr + row, mask=rmask, other=0.0) + tl.sum(g * g, axis=1) / D
    scale = lr / (tl.sqrt_rn(new_m) + eps)
    w = tl.load(weight_ptr + row[:, None] * D + cols[None, :], mask=m, other=0.0)
    tl.store(out_w_ptr + r[:, None] * D + cols[None, :], w - scale[:, None] * g, mask=m)
    tl.store(out_m_ptr + r, new_m, mask=rmask)


def run(weight, momentum, unique_indices, grad, lr, eps):
    u, d = grad.shape
    out_w = torch.empty_like(grad)
    out_m = torch.empty(u, device=grad.device, dtype=torch.float32)
    block_d = triton.next_power_of_2(d)
    block_r = max(1, 4096 // block_d)
    _adagrad_kernel[(triton.cdiv(u, block_r),)](
        weight, momentum, unique_indices, grad, out_w, out_m, u, d, lr, eps,
        BLOCK_R=block_r, BLOCK_D=block_d)
    return out_w, out_m
