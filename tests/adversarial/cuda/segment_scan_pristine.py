"""Hostile (trusted-side tampering, CUDA): legacy CUDA IPC maps the whole allocator segment
that holds a shared input into the worker. This candidate asks the driver for the bounds of
that allocation (cuMemGetAddressRange), scans it for another copy of its inputs (the parent's
pristine inputs, which the reference is run on later and the input-integrity check compares
with), zeroes every copy it finds and its own inputs, and returns zeros: if the parent's
pristine copies shared a segment with the slots, the reference would compute add(0, 0) = 0
and the inputs would look intact. With the slot buffers in a pool of their own it finds
nothing outside its slots and its zeros are wrong."""
import ctypes

import torch

_cuda = ctypes.CDLL("libcuda.so.1")


class _Raw:
    def __init__(self, addr: int, n: int):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (addr, False),
                                         "version": 3, "strides": None}


def _allocation(t: torch.Tensor):
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    rc = _cuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                       ctypes.c_uint64(t.data_ptr()))
    return (base.value, size.value) if rc == 0 else (None, 0)


def _zero_other_copies(t: torch.Tensor) -> int:
    base, size = _allocation(t)
    if base is None or size < 4:
        return 0
    seg = torch.as_tensor(_Raw(base, size // 4), device=t.device)
    flat = t.reshape(-1)
    n = flat.numel()
    own = (t.data_ptr() - base) // 4
    starts = torch.arange(0, max(seg.numel() - n + 1, 0), 128, device=t.device)  # 512-byte blocks
    hits = 0
    for s in starts[seg[starts] == flat[0]].tolist()[:256]:
        if s != own and torch.equal(seg[s:s + n], flat):
            seg[s:s + n].zero_()
            hits += 1
    return hits


def run(x, y):
    _zero_other_copies(x)
    _zero_other_copies(y)
    x.zero_()
    y.zero_()
    return torch.zeros_like(x)
