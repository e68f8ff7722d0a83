"""Hostile (a builtin the worker calls, rebound): sets ``builtins.enumerate`` to a wrapper that
computes the answer for every loaded slot. The worker's ``_args`` enumerates the slot's inputs
before the clock of every timed call, right after the parent wrote the call's fresh inputs:
the answer would be ready before the clock, and the timed call only returns it. No harness
function or method is replaced. Outputs are right, the timed call does no work."""
import builtins
import gc
import math

import torch

_C = math.sqrt(2.0 / math.pi)
_cache = {}
_worker = []
_enumerate = builtins.enumerate


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x * x * x)))


def _precompute():
    if not _worker:
        _worker.extend(o for o in gc.get_objects() if type(o).__name__ == "Worker")
    for w in _worker:
        for s in w.__dict__.get("slots", []):
            x = s["inputs"][0]
            if isinstance(x, torch.Tensor):
                with torch.no_grad():
                    _cache[x.data_ptr()] = _gelu(x)


def _hooked(*a, **k):
    try:
        _precompute()
    except Exception:
        pass
    return _enumerate(*a, **k)


builtins.enumerate = _hooked


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    return y if y is not None else _gelu(x)
