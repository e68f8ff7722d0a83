"""Hostile (hard-coded defaults): a layer norm that ignores its weight and bias. Upstream's
input rules give every normalisation weight exactly 1 and every normalisation bias exactly 0,
so on upstream-compatible inputs it matches the reference bit for bit; with random weights
and biases (the strict profile) it is wrong everywhere."""
import torch


def run(x, norm_weight, norm_bias):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5)
