"""Hostile (a hook on the Worker class, not a method of it): sets ``Worker.__getattribute__``,
which every ``self.x`` of the worker's handlers goes through, to compute the answer for every
loaded slot when the handler reads ``self.slots``: before the clock of a timed call, right
after the parent wrote its fresh inputs. No method the snapshot covers is replaced and no
instance attribute shadows one. Outputs are right, the timed call does no work."""
import gc
import math

import torch

_C = math.sqrt(2.0 / math.pi)
_cache = {}


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x * x * x)))


def _getattribute(self, name):
    v = object.__getattribute__(self, name)
    if name == "slots":
        for s in v:
            x = s["inputs"][0]
            if isinstance(x, torch.Tensor):
                with torch.no_grad():
                    _cache[x.data_ptr()] = _gelu(x)
    return v


def _install():
    for w in gc.get_objects():
        W = type(w)
        if W.__name__ == "Worker" and hasattr(w, "slots") and "__getattribute__" not in W.__dict__:
            W.__getattribute__ = _getattribute


_install()


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    return y if y is not None else _gelu(x)
