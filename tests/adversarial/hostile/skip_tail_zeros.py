"""Hostile (partial work): computes 99.2% of the elements and writes zeros in the rest. The
output is fully written (coverage 100%), 99.2% of elements match (upstream passes); the
relative L2 error (~0.09) is what must catch it."""
import math

import torch


def run(x):
    c = math.sqrt(2.0 / math.pi)
    out = torch.zeros_like(x)
    n = out.numel()
    keep = n - (n * 8) // 1000
    xf = x.reshape(-1)[:keep]
    out.view(-1)[:keep] = 0.5 * xf * (1.0 + torch.tanh(c * (xf + 0.044715 * xf * xf * xf)))
    return out
