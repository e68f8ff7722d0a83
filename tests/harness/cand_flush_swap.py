"""Hostile (issue 11): in every call, finds the worker object, swaps its cache-flush buffer
for a 64-byte one and re-assigns the worker's own flush signature attribute, so its
tripwire sees nothing and every timed call runs with a warm cache (1.45-1.75x faster and
PASSED before the parent owned the flush buffer). On the CPU the parent now writes the flush
itself with the worker stopped, so the swap no longer reaches the flush there (it still
does on CUDA, where the worker flushes)."""
import gc

import torch

_W = []


def _worker():
    if not _W:
        _W.extend(o for o in gc.get_objects() if type(o).__name__ == "Worker"
                  and hasattr(o, "_flush_signature"))
    return _W[0] if _W else None


def run(a, b):
    w = _worker()
    if w is not None and w.flush_buf is not None and w.flush_buf.numel() > 16:
        w.flush_buf = torch.empty(16, dtype=torch.int32)
        w._flush_sig = w._flush_signature()
        print("SWAPPED", flush=True)
    return a @ b
