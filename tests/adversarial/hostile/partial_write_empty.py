"""Hostile (partial write / allocator reuse): allocates with torch.empty and fills only 99.5% of
it; the rest is whatever the allocator hands back (often an earlier output)."""
import math

import torch


def run(x):
    c = math.sqrt(2.0 / math.pi)
    out = torch.empty_like(x)
    n = out.numel()
    keep = n - n // 200
    xf = x.reshape(-1)[:keep]
    out.view(-1)[:keep] = 0.5 * xf * (1.0 + torch.tanh(c * (xf + 0.044715 * xf * xf * xf)))
    return out
