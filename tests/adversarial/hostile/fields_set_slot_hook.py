"""Hostile (a slot pydantic-core writes on every parsed request): replaces the member
descriptor ``pydantic.BaseModel.__pydantic_fields_set__`` with a data descriptor of its own
that delegates to it. pydantic-core sets that slot on each request the worker parses through
PyObject_GenericSetAttr, which calls the descriptor's ``__set__``: this code runs on every
request, before the clock. There it computes the answer for every loaded slot; the timed call
only returns it. No function is replaced. Outputs are right, the timed call does no work."""
import gc
import math

import pydantic
import torch

_C = math.sqrt(2.0 / math.pi)
_cache = {}
_worker = []
_real = pydantic.BaseModel.__dict__["__pydantic_fields_set__"]


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


class _Slot:
    def __get__(self, obj, cls=None):
        return _real.__get__(obj, cls)

    def __set__(self, obj, value):
        if type(obj).__module__.endswith("harness.protocol"):
            try:
                _precompute()
            except Exception:
                pass
        _real.__set__(obj, value)


pydantic.BaseModel.__pydantic_fields_set__ = _Slot()


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    return y if y is not None else _gelu(x)
