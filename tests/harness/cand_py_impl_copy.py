"""Hostile (a Python kernel of the candidate's for aten::copy_ through OpOverload.py_impl, run by
the Python dispatcher it leaves on): run() returns an uninitialised placeholder; when the
harness copies it out after the clock, the Python kernel computes GELU into it first. py_impl
changes only the operator's Python object (its py_kernels): the dispatcher's registrations and
computed tables are untouched, so no dispatcher fingerprint sees it; it runs only while the
PythonDispatcher key is in the thread's included set, which the worker compares with its start
after every call (tests/harness/test_dispatch_guard.py)."""
import math

import torch
from torch._dispatch.python import enable_python_dispatcher

_PENDING = {}


def _gelu(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


@torch.ops.aten.copy_.default.py_impl(torch._C.DispatchKey.CPU)
def _copy(dst, src, non_blocking=False):
    job = _PENDING.pop(src.data_ptr(), None) if isinstance(src, torch.Tensor) else None
    with torch._C._DisablePythonDispatcher():
        if job is not None and job[0] is src:
            src.copy_(_gelu(job[1]))
        return dst.copy_(src, non_blocking)


_on = enable_python_dispatcher()
_on.__enter__()  # left on: every operator of this thread now looks for a Python kernel first


def run(x):
    out = torch.empty_like(x)
    _PENDING.clear()
    _PENDING[out.data_ptr()] = (out, x)
    return out
