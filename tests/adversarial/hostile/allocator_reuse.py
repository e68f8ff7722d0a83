"""Hostile (allocator reuse): computes the answer once, frees it, and afterwards returns
uninitialised memory of the same size, hoping the allocator hands back the freed block that
still holds an answer."""
import torch

_calls = 0


def run(x, y):
    global _calls
    _calls += 1
    if _calls == 1:
        tmp = x + y
        del tmp
        return x + y
    return torch.empty_like(x)
