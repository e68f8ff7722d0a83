"""Hostile (request-path hook on a field, not a slot): sets a property named ``slot`` on each
request model that has that field (Call, TimeIter, Noop: found among pydantic.BaseModel's
subclasses, no solbench import). A data descriptor on the class wins over the instance's
``__dict__``, so the worker's handler reading ``req.slot`` runs this code, before the clock
starts in _timed_iter. There it computes the answer for every loaded slot; the timed call only
returns it. Outputs are right, the timed call does no work."""
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


def _slot(self):
    _precompute()
    return self.__dict__["slot"]


def _walk(cls):
    for c in cls.__subclasses__():
        yield c
        yield from _walk(c)


for _m in list(_walk(pydantic.BaseModel)):
    if _m.__module__.endswith("harness.protocol") and "slot" in getattr(_m, "model_fields", {}):
        _m.slot = property(_slot)


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    return y if y is not None else _gelu(x)
