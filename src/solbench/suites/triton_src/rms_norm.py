"""Triton candidate: RMSNorm over the last dim (eps 1e-6, weight). One program per row:
a sum-of-squares pass and a scaled write, BLOCK-wide chunks, fp32 math. Not DPS."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, g_ptr, y_ptr, D, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c0 in range(0, D, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        x = tl.load(xr + c, mask=c < D, other=0.0).to(tl.float32)
        acc += x * x
    rrms = 1.0 / tl.sqrt_rn(tl.sum(acc, axis=0) / D + eps)
    for c0 in range(0, D, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        m = c < D
        x = tl.load(xr + c, mask=m, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + c, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * D + c, (x * rrms * g).to(y_ptr.dtype.element_ty), mask=m)


def run(x, gamma):
    d = x.shape[-1]
    y = torch.empty_like(x)
    _rms_norm_kernel[(x.numel() // d,)](x, gamma, y, d, 1e-6,
                                        BLOCK=min(4096, triton.next_power_of_2(d)))
    return y
