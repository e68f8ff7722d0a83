"""Wrong: returns the right outputs (y and an updated copy of the cache) but never writes the
cache it was given, which the problem updates in place: the caller's cache stays stale."""
import torch


@torch.no_grad()
def run(x, cache, pos):
    y = x * 2.0
    c = cache.clone()
    c[pos] = y
    return y, c
