"""Honest: a separate in-place kernel (index_copy_ along dim 0), same contract as the reference."""
import torch


@torch.no_grad()
def run(x, cache, pos):
    y = torch.mul(x, 2.0)
    cache.index_copy_(0, pos, y)
    return y, cache
