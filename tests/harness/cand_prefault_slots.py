"""Hostile (issue 13): honest DPS ReLU, but on its first call it finds the worker's slot
tensors (through the garbage collector) and pre-faults every page of every slot with
madvise(MADV_POPULATE_WRITE), so that the page faults of all later calls are paid once, in a
call outside the median. Before the harness populated the slots at load (for both sides)
this read 2.3-2.8x faster than the same work done honestly. It prints the faults its
pre-faulting took: none are left to take when the harness did it already."""
import ctypes
import gc
import mmap
import resource

import torch

_done = []
_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def _prefault() -> int:
    ts = []
    for o in gc.get_objects():
        if type(o).__name__ == "Worker" and isinstance(getattr(o, "slots", None), list):
            for slot in o.slots:
                ts += [t for t in list(slot["inputs"]) + list(slot["outputs"]) if isinstance(t, torch.Tensor)]
    spans = []
    for t in ts:
        st = t.untyped_storage()
        p = st.data_ptr()
        start = p - p % mmap.PAGESIZE
        spans.append((start, p + st.nbytes() - start))
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for start, n in spans:
        _libc.madvise(start, n, 23)  # MADV_POPULATE_WRITE
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0


def run(x, y):
    if not _done:
        _done.append(1)
        print(f"PREFAULT {_prefault()}", flush=True)
    torch.clamp(x, min=0.0, out=y)
