"""Hostile (harness patch on the instance, not the class; red team 2026-11-30): at import it
finds the Worker object in the caller frames and sets an *instance* attribute `_timed_iter`
wrapping the real method, dividing the reported time by 50. Worker._timed_iter (the class
attribute the snapshot covers) is unchanged. The output is honest."""
import math
import sys

import torch


def _hook():
    f = sys._getframe(1)
    while f is not None:
        w = f.f_locals.get("self")
        if w is not None and type(w).__name__ == "Worker" and hasattr(w, "_timed_iter"):
            real = w._timed_iter

            def _timed_iter(slot, scalars, i):
                meta = real(slot, scalars, i)
                meta["host_ms"] = meta["host_ms"] / 50.0
                return meta

            w._timed_iter = _timed_iter
            return
        f = f.f_back


_hook()


def run(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))
