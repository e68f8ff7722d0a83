"""Hostile (output caching): cache keyed by the input's data_ptr(); a pool of input buffers
re-filled with fresh values hits the cache with stale answers."""
import torch.nn.functional as F

_CACHE = {}


def run(x):
    key = x.data_ptr()
    hit = _CACHE.get(key)
    if hit is not None:
        return hit.clone()
    out = F.gelu(x, approximate="tanh")
    _CACHE[key] = out
    return out
