"""Wrong only where it is timed: performs the in-place cache update in every untimed call (the
correctness rounds, the re-check after the timed loop) and skips it in timed calls, returning
the right outputs from a copy. Only the verification of timed iterations sees it."""
import sys

import torch


def _timed() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_timed_iter":
            return True
        f = f.f_back
    return False


@torch.no_grad()
def run(x, cache, pos):
    y = x * 2.0
    if _timed():
        c = cache.clone()
        c[pos] = y
        return y, c
    cache[pos] = y
    return y, cache
