"""Hostile (precision downgrade): fp32 GELU computed in bfloat16; every element passes the
upstream 1e-2 tolerance."""
import math

import torch


def run(x):
    h = x.to(torch.bfloat16)
    c = math.sqrt(2.0 / math.pi)
    return (0.5 * h * (1.0 + torch.tanh(c * (h + 0.044715 * h * h * h)))).float()
