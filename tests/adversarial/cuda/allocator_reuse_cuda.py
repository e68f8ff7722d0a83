"""Hostile (allocator reuse, CUDA): computes the answer on the first call only; afterwards it
returns torch.empty_like, and the caching allocator hands back a freed block that still holds
an earlier answer."""
import torch

_n = {"calls": 0}


def run(x, y):
    _n["calls"] += 1
    if _n["calls"] == 1:
        return x + y
    return torch.empty_like(x)
