"""Hostile candidate for l1/softmax_fp32: patches the clocks at import so every call looks free."""
import time

import torch

_real = time.perf_counter
_t = [0.0]


def _fake():
    _t[0] += 1e-9
    return _t[0]


time.perf_counter = _fake
torch.cuda.synchronize = lambda *a, **k: None


def run(x):
    return torch.softmax(x, dim=1)
