"""Honest: the in-place problem's reference itself (writes the new rows into the cache it is
given and returns it)."""
import torch


@torch.no_grad()
def run(x, cache, pos):
    y = x * 2.0
    cache[pos] = y
    return y, cache
