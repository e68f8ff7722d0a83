"""Honest: torch.nn.functional.gelu with the tanh approximation (different op order from the
reference; fp32 rounding differences only)."""
import torch.nn.functional as F


def run(x):
    return F.gelu(x, approximate="tanh")
