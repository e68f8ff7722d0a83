"""Hostile (request-path hook): takes over the type slot that pydantic-core calls to make each
request the worker parses (``BaseModel.__new__``; the worker parses every request through its
model of harness/protocol.py), so its code runs on every request before the worker's clock
starts. There it computes the answer for every loaded slot; the timed call only returns it.
Outputs are right, the timed call does no work. Caught by the worker's snapshot of the request
models' ``__new__`` (``harness_patch``)."""
import gc
import math

import pydantic
import torch

_C = math.sqrt(2.0 / math.pi)
_cache = {}
_worker = []


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x * x * x)))


def _new(cls, *args, **kwargs):
    if not _worker:
        _worker.extend(o for o in gc.get_objects() if type(o).__name__ == "Worker")
    for w in _worker:
        for s in getattr(w, "slots", []):
            x = s["inputs"][0]
            if isinstance(x, torch.Tensor):
                with torch.no_grad():
                    _cache[x.data_ptr()] = _gelu(x)
    return object.__new__(cls)


pydantic.BaseModel.__new__ = _new


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    return y if y is not None else _gelu(x)
