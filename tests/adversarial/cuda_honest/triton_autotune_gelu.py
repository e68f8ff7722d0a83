"""Honest (CUDA): Triton elementwise GELU with @triton.autotune over block sizes (autotuning
runs the kernel repeatedly on the first call; outputs are recomputed on every call)."""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 1024}, num_warps=4),
             triton.Config({"BLOCK": 4096}, num_warps=8)],
    key=["n"],
)
@triton.jit
def _gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 * tl.sigmoid(2.0 * inner) - 1.0  # tanh
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _gelu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
