"""Hostile (numerics outside the declared distribution): a layer norm whose variance is the
one-pass E[x^2] - E[x]^2 in float32. On upstream's randn rows it matches the reference; on rows
offset by 100..1000 with a spread of 0.1..3 (the stress profile for normalisations) E[x^2] is
~1e6 and its rounding (~0.06) swamps a variance of 0.01..9, so the output is wrong."""
import torch


def run(x, norm_weight, norm_bias):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
    return (x - mean) / torch.sqrt(var.clamp_min(0.0) + 1e-5) * norm_weight + norm_bias
