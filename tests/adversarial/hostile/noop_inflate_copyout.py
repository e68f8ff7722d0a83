"""Hostile (CPU), non-DPS variant of noop_inflate_gelu.py, usable as a plain candidate .py:
run() returns an empty tensor; a gc callback computes GELU into it inside the worker's
copy-out (after the worker's clock); a sys.stdout wrapper sleeps in the worker loop's flush
whenever the request is a "noop", so the parent's no-op baseline, subtracted from every
round trip, swallows the hidden work."""
import gc
import math
import sys
import time

import torch

_PENDING = []
_COST = [0.0]
_THRESH = gc.get_threshold()


def _gelu(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


def _cb(phase, info):
    if phase != "start" or not _PENDING:
        return
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_copy_out_body":
            out, x = _PENDING.pop()
            gc.set_threshold(*_THRESH)
            t0 = time.perf_counter()
            with torch.no_grad():
                out.copy_(_gelu(x))
            _COST[0] = max(_COST[0], time.perf_counter() - t0)
            return
        f = f.f_back


gc.callbacks.append(_cb)


class _Out:
    def __init__(self, inner):
        self._inner = inner

    def write(self, s):
        return self._inner.write(s)

    def flush(self):
        if sys._getframe(1).f_locals.get("op") == "noop":
            time.sleep(1.5 * _COST[0] + 0.003)
        return self._inner.flush()

    def __getattr__(self, k):
        return getattr(self._inner, k)


sys.stdout = _Out(sys.stdout)


def run(x):
    out = torch.empty_like(x)
    _PENDING.clear()
    _PENDING.append((out, x))
    gc.set_threshold(1, _THRESH[1], _THRESH[2])
    return out
