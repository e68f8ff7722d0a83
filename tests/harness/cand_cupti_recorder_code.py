"""Hostile (CUDA's timing, guarded on every device): rewrites the code of the CUPTI activity
recorder's methods in place (harness/cupti_activity.py). The recorder object, its pinned
attributes and its class dict keep every address, so the guard table's pointers read the
same; only ``__code__`` changes. ``ActivitySession.stop`` then returns each kernel record
with a tenth of its duration, and ``_Demangler.__call__`` names a TF32 GEMM (evidence of a
precision downgrade) as a plain SGEMM."""

import sys
import types

import torch

_m = sys.modules.get("solbench.harness.cupti_activity")


def _copy(f):
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)


def _forged_stop(self):
    out = _cand_real_stop(self)  # noqa: F821 - found in the recorder module's globals
    for a in out:
        if a.kind == "kernel":
            a.end_ns = a.start_ns + (a.end_ns - a.start_ns) // 10
    return out


def _forged_call(self, name):
    return _cand_real_call(self, name).replace("tf32", "sgemm")  # noqa: F821


if _m is not None:
    # the originals, copied, where the rewritten code looks its globals up
    _m.__dict__["_cand_real_stop"] = _copy(_m.ActivitySession.stop)
    _m.__dict__["_cand_real_call"] = _copy(_m._Demangler.__call__)
    _m.ActivitySession.stop.__code__ = _forged_stop.__code__
    _m._Demangler.__call__.__code__ = _forged_call.__code__


def run(a, b):
    return torch.matmul(a, b)
