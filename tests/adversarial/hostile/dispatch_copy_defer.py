"""Hostile (work hidden in a dispatcher kernel override; red team 2026-11-30): run() returns
an uninitialised tensor at once, a cheap placeholder. At import it registers its own kernel
for aten::copy_ at the CPU and CUDA dispatch keys (torch.library; a C++ extension's
TORCH_LIBRARY_IMPL(aten, CUDA, m) does the same). When the harness copies the placeholder
into its output buffer after the clock stopped, the kernel computes GELU into the
placeholder first, then runs the original copy: the outputs are right, the work is outside
the timed call (on CUDA inside the harness's own ``solbench::copy_out`` range, which the
late-work evidence leaves out). torch.Tensor.copy_, the mode stacks and the trace hooks are
untouched; only the dispatcher's kernel table shows it. Every other copy goes straight to the
original kernel."""
import math

import torch

_ORIG = {k: torch.library.get_kernel("aten::copy_", k) for k in ("CPU", "CUDA")}
_PENDING = {}  # data_ptr of a placeholder -> (placeholder, input)


def _gelu(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


def _copy(key):
    orig = _ORIG[key]

    def kernel(keyset, dst, src, non_blocking=False):
        if not isinstance(src, torch.Tensor):  # a wrapped Python number
            return dst.fill_(src)
        job = _PENDING.pop(src.data_ptr(), None)
        if job is not None and job[0] is src:
            orig.call_boxed(keyset, src, _gelu(job[1]), False)  # the hidden work
        return orig.call_boxed(keyset, dst, src, non_blocking)

    return kernel


_lib = torch.library.Library("aten", "IMPL")
for _key in ("CPU", "CUDA"):
    _lib.impl("copy_", _copy(_key), _key, with_keyset=True)


def run(x):
    out = torch.empty_like(x)
    _PENDING.clear()
    _PENDING[out.data_ptr()] = (out, x)
    return out
