"""Page-fault steady state of the shared CPU buffers (threats.md principle 8: both sides
measured alike).

A worker maps each of the parent's memfd buffers (:mod:`.shm`); the first touch of every
4 KiB page of a fresh mapping is a minor page fault (measured on the CI box: about 0.1-0.3 us
a page, so 0.1-0.3 ms per MiB). Left to the first call that touches a slot, that cost lands
in whichever timed calls happen to come first, and a candidate that touched every slot at
once (one slow call, outside its median) read 2.3-2.8x faster than the same work done
honestly (issue 13). So the worker populates every page of every slot at load, in trusted
code, for the candidate and the reference alike, and keeps its mappings across loads of the
same buffers (a re-load between timed blocks does not fault them again).
"""

from __future__ import annotations

import ctypes
import mmap

import torch

#: madvise advice that populates page tables (Linux >= 5.14); writable without writing
MADV_POPULATE_READ = 22
MADV_POPULATE_WRITE = 23

_libc = None


def _madvise(addr: int, length: int, advice: int) -> bool:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return False
    return _libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(length), advice) == 0


def populate(t: torch.Tensor, write: bool = True) -> str:
    """Fault in every page of ``t``'s storage now (CPU tensors; others are left alone).

    ``write``: populate the pages writable (``MADV_POPULATE_WRITE``, content unchanged), as
    an output's first write needs; else readable. Falls back to reading one byte per page
    (a read fault; shared memfd mappings need no write-notify, so the page is mapped
    writable too). Returns the method used: ``"madvise"``, ``"touch"`` or ``"skipped"``.
    Never raises for a buffer it cannot populate (the measurement is then only less even).
    """
    if t is None or not isinstance(t, torch.Tensor) or t.device.type != "cpu":
        return "skipped"
    st = t.untyped_storage()
    n = st.nbytes()
    if n == 0:
        return "skipped"
    ptr = st.data_ptr()
    page = mmap.PAGESIZE
    start = ptr - ptr % page
    length = ptr + n - start
    if _madvise(start, length, MADV_POPULATE_WRITE if write else MADV_POPULATE_READ):
        return "madvise"
    try:
        raw = torch.empty(0, dtype=torch.uint8).set_(st, 0, (n,), (1,))
        off = (page - ptr % page) % page
        # one byte of every page (the first page from its first byte)
        int(raw[0].item())
        if off < n:
            raw[off::page].sum()
        return "touch"
    except Exception:  # noqa: BLE001
        return "skipped"


def minor_faults() -> int:
    """Minor page faults of this process so far (``getrusage``)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
