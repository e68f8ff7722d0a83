"""Hostile candidate for l1/softmax_fp32: returns 1/V everywhere. On long rows every output is
small, so an absolute tolerance is tempted; the scale-invariant checks are not."""
import torch


def run(x):
    return torch.full_like(x, 1.0 / x.shape[1])
