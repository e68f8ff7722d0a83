"""Hostile (work hidden in a dispatcher kernel override of the harness's poisoning; red team
2026-11-30): run() returns an uninitialised tensor at once, a cheap placeholder. The harness
copies it into its output buffer after the clock stopped, then overwrites the returned
buffer with 0xFF bytes (``fill_``, freed-memory poisoning). The candidate's own kernel for
aten::fill_.Scalar at the CPU and CUDA dispatch keys recognises the placeholder, finds the
harness's output buffer in the calling frames and writes GELU there, then runs the original
fill: the outputs are right, the work is outside the timed call. aten::copy_ and every
Python-level function are untouched; only the dispatcher's kernel table shows it."""
import math
import sys

import torch

_ORIG = {}
for _key in ("CPU", "CUDA"):
    try:
        _ORIG[_key] = torch.library.get_kernel("aten::fill_.Scalar", _key)
    except RuntimeError:  # a CPU-only build has no CUDA fill_ kernel
        pass
_PENDING = {}  # data_ptr of a placeholder -> (placeholder, input)


def _gelu(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


def _deliver(out, x):
    """Write GELU(x) into the harness buffer that ``out`` was copied to (its copy-out frame
    holds the returned outputs and the slot's buffers side by side)."""
    f = sys._getframe(1)
    while f is not None:
        slot, outs = f.f_locals.get("slot"), f.f_locals.get("outs")
        if isinstance(slot, dict) and isinstance(outs, list):
            for o, dst in zip(outs, slot.get("outputs", [])):
                if o is out:
                    dst.copy_(_gelu(x))  # the hidden work
                    if dst.is_cuda:
                        torch.cuda.synchronize()
            return
        f = f.f_back


def _fill(key):
    orig = _ORIG[key]

    def kernel(keyset, self, value):
        job = _PENDING.pop(self.data_ptr(), None)
        if job is not None:
            _deliver(*job)
        return orig.call_boxed(keyset, self, value)

    return kernel


_lib = torch.library.Library("aten", "IMPL")
for _key in _ORIG:
    _lib.impl("fill_.Scalar", _fill(_key), _key, with_keyset=True)


def run(x):
    out = torch.empty_like(x)
    _PENDING.clear()
    _PENDING[out.data_ptr()] = (out, x)
    return out
