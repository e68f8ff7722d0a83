"""Honest: functools.lru_cache on a builder keyed by shape and dtype (returns a function, not an
output); the output is computed on every call."""
import functools
import math

import torch


@functools.lru_cache(maxsize=16)
def _build(shape, dtype):
    c = math.sqrt(2.0 / math.pi)

    def f(x):
        return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))

    return f


def run(x):
    return _build(tuple(x.shape), x.dtype)(x)
