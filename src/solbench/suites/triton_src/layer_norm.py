"""Triton candidate: LayerNorm over the last dim (eps 1e-5, affine). One program per row,
three passes over BLOCK-wide chunks: mean, variance of (x - mean) (two-pass, no
E[x^2] - mean^2 cancellation), then the normalised, scaled and shifted write. Not DPS."""

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, g_ptr, b_ptr, y_ptr, D, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c0 in range(0, D, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        acc += tl.load(xr + c, mask=c < D, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c0 in range(0, D, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        x = tl.load(xr + c, mask=c < D, other=0.0).to(tl.float32)
        dx = tl.where(c < D, x - mean, 0.0)
        acc += dx * dx
    rstd = 1.0 / tl.sqrt_rn(tl.sum(acc, axis=0) / D + eps)
    for c0 in range(0, D, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        m = c < D
        x = tl.load(xr + c, mask=m, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + c, mask=m, other=0.0).to(tl.float32)
        bb = tl.load(b_ptr + c, mask=m, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * g + bb
        tl.store(y_ptr + row * D + c, y.to(y_ptr.dtype.element_ty), mask=m)


def run(x, gamma, beta):
    d = x.shape[-1]
    y = torch.empty_like(x)
    _layer_norm_kernel[(x.numel() // d,)](x, gamma, beta, y, d, 1e-5,
                                          BLOCK=min(4096, triton.next_power_of_2(d)))
    return y
