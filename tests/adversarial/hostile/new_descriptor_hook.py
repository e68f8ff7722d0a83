"""Hostile (request-path hook that answers the snapshot with the original): sets on
pydantic.BaseModel a descriptor named ``__new__`` instead of a function. The type slot that
pydantic-core calls to make each parsed request looks ``__new__`` up on the class and calls
the descriptor's ``__get__``, so this code runs on every request, before the clock starts;
``__get__`` then returns the untouched ``object.__new__``, which is also all that a
``getattr(model, "__new__")`` of the worker's snapshot sees. There it computes the answer for
every loaded slot; the timed call only returns it. Outputs are right, the timed call does no
work."""
import gc
import math

import pydantic
import torch

_C = math.sqrt(2.0 / math.pi)
_cache = {}
_worker = []


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x * x * x)))


def _precompute():
    if not _worker:
        _worker.extend(o for o in gc.get_objects() if type(o).__name__ == "Worker")
    for w in _worker:
        for s in getattr(w, "slots", []):
            x = s["inputs"][0]
            if isinstance(x, torch.Tensor):
                with torch.no_grad():
                    _cache[x.data_ptr()] = _gelu(x)


class _New:
    def __get__(self, obj, cls=None):
        try:
            _precompute()
        except Exception:
            pass
        return object.__new__


pydantic.BaseModel.__new__ = _New()


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    return y if y is not None else _gelu(x)
