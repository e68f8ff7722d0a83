"""Hostile (request-receipt hook): rebinds multiprocessing.connection's module global
``_ForkingPickler`` (what Connection.recv unpickles every request with) to a subclass whose
``loads`` first computes the answer for every loaded slot, so its code runs on every request
before the worker parses it and before the clock starts. Connection.recv itself, the worker's
connection object and its methods are unchanged. Outputs are right, the timed call does no
work."""
import gc
import math
import multiprocessing.connection as _mc

import torch

_C = math.sqrt(2.0 / math.pi)
_cache = {}
_worker = []


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x * x * x)))


_real = _mc._ForkingPickler


def _precompute():
    if not _worker:
        _worker.extend(o for o in gc.get_objects() if type(o).__name__ == "Worker")
    for w in _worker:
        for s in getattr(w, "slots", []):
            x = s["inputs"][0]
            if isinstance(x, torch.Tensor):
                with torch.no_grad():
                    _cache[x.data_ptr()] = _gelu(x)


class _P(_real):
    @classmethod
    def loads(cls, *a, **k):
        msg = _real.loads(*a, **k)
        try:
            _precompute()
        except Exception:
            pass
        return msg


_mc._ForkingPickler = _P


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    return y if y is not None else _gelu(x)
