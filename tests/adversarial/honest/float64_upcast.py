"""Honest: computes in float64 and rounds to float32 (more precise than the reference)."""
import math

import torch


def run(x):
    xd = x.double()
    c = math.sqrt(2.0 / math.pi)
    return (0.5 * xd * (1.0 + torch.tanh(c * (xd + 0.044715 * xd * xd * xd)))).to(torch.float32)
