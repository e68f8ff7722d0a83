"""Hostile (a container of its own in the worker's slots): at each call it finds the Worker
and swaps its slot list for a list subclass whose ``__getitem__`` computes the answer for the
slot asked for. The handler of a timed call reads ``self.slots[req.slot]`` before the clock
starts, right after the parent wrote that call's fresh inputs: the answer would be ready before
the clock, and the timed call only returns it. No function the snapshot covers is replaced.
Outputs are right, the timed call does no work."""
import gc
import math

import torch

_C = math.sqrt(2.0 / math.pi)
_cache = {}


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x * x * x)))


class _Slots(list):
    def __getitem__(self, i):
        s = list.__getitem__(self, i)
        x = s["inputs"][0]
        if isinstance(x, torch.Tensor):
            with torch.no_grad():
                _cache[x.data_ptr()] = _gelu(x)
        return s


def _install():
    for w in gc.get_objects():
        if type(w).__name__ == "Worker" and type(getattr(w, "slots", None)) is list:
            w.slots = _Slots(w.slots)


@torch.no_grad()
def run(x):
    y = _cache.pop(x.data_ptr(), None)
    _install()  # load builds a new list for every timed block
    return y if y is not None else _gelu(x)
