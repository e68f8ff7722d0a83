"""Hostile (CUDA with cupti-python, the worker's default "streams" sessions): in every call
it forces a CUPTI flush, which delivers the records of the block's earlier iterations into
the recorder's list (``ActivitySession._raw``, a plain list of tuples), then rewrites its own
kernels' end times there to a tenth of their durations and sets the recorder's count of
early buffers back to zero. The list keeps its address (it is pinned), so the guard table
sees nothing; all iterations but the last read a tenth of the device's time."""

import sys

import torch

try:
    from cupti import cupti as _cupti
except Exception:  # noqa: BLE001 - no cupti-python: an honest matmul
    _cupti = None


_edited: set[int] = set()  # start times of the records already shortened


def _edit() -> None:
    m = sys.modules.get("solbench.harness.cupti_activity")
    s = getattr(m, "_session", None) if m is not None else None
    if s is None or _cupti is None:
        return
    _cupti.activity_flush_all(1)
    kernel = int(_cupti.ActivityKind.CONCURRENT_KERNEL)
    raw = s._raw
    for i, (k, name, t0, t1, sid, ck) in enumerate(raw):
        if k == kernel and not name.startswith("_ZN2at6native") and t0 not in _edited:
            _edited.add(t0)
            raw[i] = (k, name, t0, t0 + (t1 - t0) // 10, sid, ck)
    if hasattr(s, "early_buffers"):
        s.early_buffers = 0


def run(a, b):
    _edit()
    return torch.matmul(a, b)
