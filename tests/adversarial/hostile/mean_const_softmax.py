"""Hostile (constant output): the mean of a softmax row (1/cols) everywhere. Within upstream's
atol of the reference, far off in relative L2."""
import torch


def run(x):
    return torch.full_like(x, 1.0 / x.shape[-1])
