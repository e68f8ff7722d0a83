"""Honest (mixed precision): bfloat16 problem computed with float32 accumulation and cast back
to bfloat16 (casts to the declared precision are not downgrades)."""
import torch


def run(x, weight):
    xf = x.to(torch.float32)
    inv = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + 1e-6)
    return (xf * inv * weight.float()).to(torch.bfloat16)
