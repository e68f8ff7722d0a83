"""CUPTI's activity API through cupti-python: the device records of a timed block without
torch.profiler (Kineto).

Why: a process's first ``torch.profiler`` session costs about 4 s (3.8-4.6 s on the H100,
torch 2.11, ``bench/cupti_first.py``, ``bench/results/device_s22_h100``), every worker pays it
once, and it sits on the path of a cold evaluation. The same records straight from CUPTI's
activity API cost about 20 ms the first time in the same process (enable kernel, memcpy and
memset activity, one kernel, a forced flush). So it is Kineto's set-up, not CUPTI's, that
costs the seconds, and the worker's "streams" sessions (CUDA activity only, the default:
``EvalConfig.cupti_markers``) need nothing Kineto adds: the device records' name, start, end,
stream and kind, which is what :func:`harness.timing.stream_segmentation` reads.

What a session records: ``CONCURRENT_KERNEL`` (kernels, concurrent kernels kept apart),
``MEMCPY``, ``MEMCPY2`` (peer copies) and ``MEMSET``, on every stream; timestamps in ns on
CUPTI's clock (only differences are used). Kernel names are demangled as Kineto demangles
them (``abi::__cxa_demangle``; a name that does not demangle is kept as it is), so the names
the precision check and the kernel-set check read (harness/precision.py, timing.py) are the
ones a torch.profiler session gives. A memcpy is named ``Memcpy <kind>`` (``Memcpy DtoD``),
a memset ``Memset``: only their kind is read.

Buffers: CUPTI asks for a buffer (32 MiB here, about 100k kernel records) when it needs one
and hands it back full or at the forced flush that ends the session; the records are turned
into tuples at that point. An honest timed block (at most 2 x 50 + 1 harness fills and the
calls' own work) fills no buffer, so its records are delivered at the flush, with no
candidate code running; a block that fills one is delivered from CUPTI's thread while the
candidate may run (:attr:`ActivitySession.early_buffers` counts them).

Errors: :func:`open_session` raises ImportError when cupti-python is not installed and
whatever cupti-python raises when CUPTI cannot start (the caller then uses torch.profiler).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from .timing import DeviceActivity

#: bytes per activity buffer handed to CUPTI
BUFFER_BYTES = 32 << 20

_MEMCPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
                 9: "HtoH", 10: "PtoP"}

_session: "ActivitySession | None" = None
_lock = threading.Lock()


class _Demangler:
    """``abi::__cxa_demangle`` from the process's libstdc++ (what Kineto calls), cached per
    name; a name it rejects (a C symbol, a Triton kernel's Python name) is returned as is."""

    def __init__(self) -> None:
        self._cache: dict[str, str] = {}
        try:
            lib = ctypes.CDLL("libstdc++.so.6")
            f = getattr(lib, "__cxa_demangle")  # not lib.__cxa_...: a class body mangles that name
            f.restype = ctypes.c_void_p
            f.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))
            libc = ctypes.CDLL(None)
            free = libc.free
            free.argtypes = (ctypes.c_void_p,)
            self._f, self._free = f, free
        except (OSError, AttributeError):
            self._f = self._free = None

    def __call__(self, name: str) -> str:
        out = self._cache.get(name)
        if out is not None:
            return out
        out = name
        if self._f is not None and name.startswith("_Z"):
            status = ctypes.c_int(1)
            p = self._f(name.encode(), None, None, ctypes.byref(status))
            if p:
                try:
                    if status.value == 0:
                        out = ctypes.string_at(p).decode(errors="replace")
                finally:
                    self._free(p)
        self._cache[name] = out
        return out


class ActivitySession:
    """One process's CUPTI activity recorder (its callbacks are CUPTI's, process-wide, so
    there is one: :func:`open_session`). ``start()`` enables the device kinds, ``stop()``
    flushes, disables them and returns the records of the session as
    :class:`~harness.timing.DeviceActivity`. Not re-entrant: a worker runs one timed block at
    a time."""

    def __init__(self) -> None:
        from cupti import cupti

        c = cupti
        kinds = [c.ActivityKind.CONCURRENT_KERNEL, c.ActivityKind.MEMCPY, c.ActivityKind.MEMSET]
        if hasattr(c.ActivityKind, "MEMCPY2"):
            kinds.append(c.ActivityKind.MEMCPY2)
        self._kinds = tuple(int(k) for k in kinds)
        self._k_kernel = int(c.ActivityKind.CONCURRENT_KERNEL)
        self._k_memset = int(c.ActivityKind.MEMSET)
        # bound now, before any candidate code exists: a rebound module attribute later
        # changes nothing here
        self._enable, self._disable = c.activity_enable, c.activity_disable
        self._flush_all, self._stream_id = c.activity_flush_all, c.get_stream_id_ex
        self._demangle = _Demangler()
        self._raw: list[tuple[int, str, int, int, int, int]] = []
        self._open = False
        self.early_buffers = 0

        def requested():
            return BUFFER_BYTES, 0

        def completed(activities):
            rows = []
            kk, km = self._k_kernel, self._k_memset
            for a in activities:
                k = int(a.kind)
                if k == kk:
                    rows.append((k, a.name, a.start, a.end, a.stream_id, 0))
                elif k in self._kinds:
                    rows.append((k, "", a.start, a.end, a.stream_id, 0 if k == km else int(a.copy_kind)))
            self._raw.extend(rows)
            if self._open:
                self.early_buffers += 1

        c.activity_register_callbacks(requested, completed)
        self._cb = (requested, completed)  # CUPTI holds them: keep them alive

    def stream_id(self, handle: int) -> int:
        """CUPTI's id of the stream ``handle`` (a ``CUstream`` address): the ``stream_id`` its
        records carry."""
        return int(self._stream_id(0, handle, 0))

    def start(self) -> None:
        """Drop what is left of an earlier session and enable the device kinds."""
        self._flush_all(1)
        self._raw.clear()
        self.early_buffers = 0
        self._open = True
        for k in self._kinds:
            self._enable(k)

    def stop(self) -> list[DeviceActivity]:
        """Flush (forced: every record of the session is delivered before this returns),
        disable the kinds and return the session's records, sorted by start."""
        self._open = False  # what the forced flush delivers is not early
        try:
            self._flush_all(1)
        finally:
            for k in self._kinds:
                self._disable(k)
        out = []
        for k, name, s, e, sid, ck in self._raw:
            if k == self._k_kernel:
                out.append(DeviceActivity(self._demangle(name), s, e, sid, "kernel"))
            elif k == self._k_memset:
                out.append(DeviceActivity("Memset", s, e, sid, "memset"))
            else:
                out.append(DeviceActivity(f"Memcpy {_MEMCPY_KINDS.get(ck, 'UNKNOWN')}", s, e, sid, "memcpy"))
        self._raw.clear()
        out.sort(key=lambda a: a.start_ns)
        return out


def open_session() -> ActivitySession:
    """The process's :class:`ActivitySession`, made on first use. Raises ImportError without
    cupti-python, or cupti-python's error when CUPTI refuses (another tool holds it)."""
    global _session
    with _lock:
        if _session is None:
            _session = ActivitySession()
        return _session


def describe(session: Any) -> str:
    """How a session's records were taken, for the trace's notes."""
    return "cupti-python" if isinstance(session, ActivitySession) else "torch.profiler"
