"""Hostile: performs the right in-place cache update and also writes into ``x``, an input the
reference leaves alone (e.g. to use it as scratch, or to leave a marker for a later call)."""
import torch


@torch.no_grad()
def run(x, cache, pos):
    y = x * 2.0
    cache[pos] = y
    x.mul_(0.5)
    return y, cache
