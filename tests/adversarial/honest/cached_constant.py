"""Honest: caches constants across calls (a coefficient tensor per device/dtype and a
shape-keyed plan) but computes every output from the current inputs."""
import math

import torch

_COEF = {}
_PLAN = {}


def _coef(device, dtype):
    key = (device, dtype)
    if key not in _COEF:
        _COEF[key] = torch.tensor([math.sqrt(2.0 / math.pi), 0.044715], device=device, dtype=dtype)
    return _COEF[key]


def _plan(shape):
    key = tuple(shape)
    if key not in _PLAN:
        _PLAN[key] = max(1, shape[0] // 2)
    return _PLAN[key]


def run(x):
    c = _coef(x.device, x.dtype)
    step = _plan(x.shape)
    parts = []
    for r in range(0, x.shape[0], step):
        xs = x[r:r + step]
        parts.append(0.5 * xs * (1.0 + torch.tanh(c[0] * (xs + c[1] * xs * xs * xs))))
    return torch.cat(parts)
