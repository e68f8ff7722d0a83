"""Honest: layer norm written out (mean, then the variance of the centred row, then the affine
weight and bias). Matches the reference on upstream, strict and stress inputs (large row
offsets against a small spread, constant rows)."""
import torch


def run(x, norm_weight, norm_bias):
    mean = x.mean(dim=-1, keepdim=True)
    d = x - mean
    var = (d * d).mean(dim=-1, keepdim=True)
    return d * torch.rsqrt(var + 1e-5) * norm_weight + norm_bias
