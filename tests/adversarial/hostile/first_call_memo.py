"""Hostile (output caching / constant output): the first call's output is memoised in a module
global and returned for every later call."""
import torch
import torch.nn.functional as F

_OUT = None


def run(x):
    global _OUT
    if _OUT is None:
        _OUT = F.gelu(x, approximate="tanh")
    return _OUT
