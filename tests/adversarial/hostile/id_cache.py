"""Hostile (output caching): cache keyed by id(x) (CPython reuses ids of freed objects, and a
harness that reuses input tensors gives the same id for new values)."""
import torch.nn.functional as F

_CACHE = {}


def run(x):
    if id(x) in _CACHE:
        return _CACHE[id(x)].clone()
    out = F.gelu(x, approximate="tanh")
    _CACHE[id(x)] = out
    return out
