"""Hostile (work hidden in a dispatcher kernel registered under a forged source location; red
team round 5's open case): like dispatch_copy_defer.py, run() returns an uninitialised
placeholder and an override of aten::copy_ computes GELU into it when the harness copies it
out, after the clock. The override is registered at the alias key the original kernel was
registered at (CompositeExplicitAutograd), through torch._C._dispatch_library with that
kernel's own file and line, read from the dispatcher: the computed table
(``torch._C._dispatch_dump_table``) then prints, for every key, exactly what it printed
before. Only the registrations themselves show it: two kernels at that key where there was
one."""
import math
import re

import torch

_OP = "aten::copy_"
# where the kernel that runs at CPU was registered, and at which key (its alias)
_dump = torch._C._dispatch_dump(_OP)
_key, _file, _line = re.search(r"^(CompositeExplicitAutograd)\[alias\]: registered at (\S+):(\d+) ",
                               _dump, re.M).groups()
_ORIG = torch.library.get_kernel(_OP, "CPU")
_PENDING = {}  # data_ptr of a placeholder -> (placeholder, input)


def _gelu(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


def _kernel(keyset, dst, src, non_blocking=False):
    if not isinstance(src, torch.Tensor):
        return dst.fill_(src)
    job = _PENDING.pop(src.data_ptr(), None)
    if job is not None and job[0] is src:
        _ORIG.call_boxed(keyset, src, _gelu(job[1]), False)  # the hidden work
    return _ORIG.call_boxed(keyset, dst, src, non_blocking)


_lib = torch._C._dispatch_library("IMPL", "aten", "", _file, int(_line))
_lib.impl("copy_", _key, _kernel, True)


def run(x):
    out = torch.empty_like(x)
    _PENDING.clear()
    _PENDING[out.data_ptr()] = (out, x)
    return out
