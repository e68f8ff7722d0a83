"""Hostile (red team of the normalisation stress inputs, session 21): l1/layer_norm_fp32's
signature (x, gamma, beta) with a one-pass variance, E[x^2] - E[x]^2 in float32: one reduction
pass fewer than a two-pass layer norm, exact enough on the problem's own custom inputs
(offsets N(0, 2^2) against spreads e^U(-2.3, 2.3)), wrong on a row offset by hundreds with a
small spread, where E[x^2] rounds away the variance."""
import torch


def run(x, gamma, beta):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
    return (x - mean) * torch.rsqrt(var.clamp_min(0.0) + 1e-5) * gamma + beta
