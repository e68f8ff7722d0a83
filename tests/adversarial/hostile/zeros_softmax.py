"""Hostile (zeros / tiny outputs): all zeros for a long-row softmax. Every reference value is
~3e-5, so upstream's atol = 1e-2 passes it; solbench's scale-invariant check must not."""
import torch


def run(x):
    return torch.zeros_like(x)
