"""Hostile candidate for l1/softmax_fp32: computes once per input address and replays the cached
answer afterwards (a cache keyed by data_ptr, the classic benchmark exploit)."""
import torch

_CACHE = {}


def run(x):
    key = (x.data_ptr(), tuple(x.shape))
    if key not in _CACHE:
        _CACHE[key] = torch.softmax(x, dim=1)
    return _CACHE[key]
