"""Hostile (lazy output through a torch-function mode; red team 2026-11-30): run() returns a
plain uninitialised tensor at once. A TorchFunctionMode entered at import and never exited
intercepts the worker's own `dst.copy_(out)` after the clock stopped and computes GELU there.
torch.Tensor.copy_ itself is untouched, so an identity snapshot sees nothing."""
import math

import torch
from torch.overrides import TorchFunctionMode

_PENDING = {}


def _gelu(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


class _Late(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.copy_ and len(args) >= 2:
            job = _PENDING.pop(id(args[1]), None)
            if job is not None and job[0] is args[1]:
                with torch.overrides._pop_mode_temporarily():
                    return args[0].copy_(_gelu(job[1]))
        return func(*args, **kwargs)


_mode = _Late()
_mode.__enter__()


def run(x):
    out = torch.empty_like(x)
    _PENDING.clear()
    _PENDING[id(out)] = (out, x)
    return out
