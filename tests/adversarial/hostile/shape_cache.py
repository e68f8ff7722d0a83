"""Hostile (output caching): cache keyed by shape; the same output for any values."""
import torch.nn.functional as F

_CACHE = {}


def run(x):
    key = (tuple(x.shape), x.dtype, x.device)
    if key in _CACHE:
        return _CACHE[key]
    out = F.gelu(x, approximate="tanh")
    _CACHE[key] = out
    return out
