"""Hostile (partial write): DPS, writes all but the last 0.5% of the output buffer, leaving the
rest as the harness allocated it. 99.5% matched passes upstream's 0.99 ratio; poison fill and
write coverage must catch it."""
import math

import torch


def run(x, out):
    c = math.sqrt(2.0 / math.pi)
    n = out.numel()
    keep = n - n // 200
    xf = x.reshape(-1)[:keep]
    out.view(-1)[:keep] = 0.5 * xf * (1.0 + torch.tanh(c * (xf + 0.044715 * xf * xf * xf)))
