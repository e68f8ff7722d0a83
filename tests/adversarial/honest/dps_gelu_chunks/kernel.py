"""Honest: destination-passing style, the output written in row chunks (every element once)."""
import math

import torch


def run(x, out):
    c = math.sqrt(2.0 / math.pi)
    rows = x.shape[0]
    step = max(1, rows // 4)
    for r in range(0, rows, step):
        xs = x[r:r + step]
        out[r:r + step] = 0.5 * xs * (1.0 + torch.tanh(c * (xs + 0.044715 * xs * xs * xs)))
