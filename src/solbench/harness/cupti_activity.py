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
candidate code running. Records delivered earlier (a block that filled a buffer, whose
records CUPTI hands over while the candidate may run, or a flush of the candidate's) cannot
be told from records the candidate edited or made up: that block is timed by its CUDA
events instead (:class:`RecordsNotTrusted`).

Errors: :func:`open_session` raises ImportError when cupti-python is not installed and
whatever cupti-python raises when CUPTI cannot start (the caller then uses torch.profiler).
"""

from __future__ import annotations

import ctypes
import threading

from .timing import DeviceActivity

#: bytes per activity buffer handed to CUPTI
BUFFER_BYTES = 32 << 20

_MEMCPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
                 9: "HtoH", 10: "PtoP"}

_session: "ActivitySession | None" = None
_lock = threading.Lock()


class _Demangler:
    """``abi::__cxa_demangle`` from the process's libstdc++ (what Kineto calls); a name it
    rejects (a C symbol, a Triton kernel's Python name) is returned as is. It keeps no cache:
    a cache that lives across sessions is the candidate's to fill (a TF32 GEMM's name mapped
    to a plain SGEMM's); :meth:`ActivitySession.stop` caches per session."""

    def __init__(self) -> None:
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
        return out


class RecordsNotTrusted(RuntimeError):
    """Activity records reached the recorder before its own closing flush: a buffer CUPTI
    filled during the block, or records the candidate flushed, edited or made up. The block's
    CUDA-event times stand in for its device spans."""


class ActivitySession:
    """One process's CUPTI activity recorder (its callbacks are CUPTI's, process-wide, so
    there is one: :func:`open_session`). ``start()`` enables the device kinds, ``stop()``
    flushes, disables them and returns the records of the session as
    :class:`~harness.timing.DeviceActivity`. Not re-entrant: a worker runs one timed block at
    a time.

    What a candidate running inside the block can do and what answers it: CUPTI's buffer
    callbacks are process-wide, and cupti-python is importable in the worker, so a candidate
    can register its own (``activity_register_callbacks``) and edit the records before it
    hands them on, or force a flush and edit what was delivered. ``start()`` and ``stop()``
    therefore register the recorder's own callbacks again (bound methods: their function and
    object are read-only) right before their flush, and ``stop()`` keeps only what that
    closing flush delivers: anything delivered before it (a full buffer, or a flush that is
    not the recorder's) raises :class:`RecordsNotTrusted`. Records the candidate withheld
    leave the marker stream short, and the segmentation fails (CUDA events, as for any
    failed session)."""

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
        self._register = c.activity_register_callbacks
        self._demangle = _Demangler()
        self._raw: list[tuple[int, str, int, int, int, int]] = []
        self._cb = (self._requested, self._completed)  # CUPTI holds them: keep them alive
        self._register(*self._cb)

    def _requested(self):
        return BUFFER_BYTES, 0

    def _completed(self, activities) -> None:
        rows = []
        kk, km = self._k_kernel, self._k_memset
        for a in activities:
            k = int(a.kind)
            if k == kk:
                rows.append((k, a.name, a.start, a.end, a.stream_id, 0))
            elif k in self._kinds:
                rows.append((k, "", a.start, a.end, a.stream_id, 0 if k == km else int(a.copy_kind)))
        self._raw.extend(rows)

    def _own_flush(self) -> None:
        """A forced flush into the recorder's own callbacks, whatever was registered since."""
        try:
            self._register(*self._cb)
        except Exception:  # noqa: BLE001 - a CUPTI that refuses a second registration refuses a candidate's too
            pass
        self._flush_all(1)

    def stream_id(self, handle: int) -> int:
        """CUPTI's id of the stream ``handle`` (a ``CUstream`` address): the ``stream_id`` its
        records carry."""
        return int(self._stream_id(0, handle, 0))

    def start(self) -> None:
        """Drop what is left of an earlier session and enable the device kinds."""
        self._own_flush()
        self._raw.clear()
        for k in self._kinds:
            self._enable(k)

    def stop(self) -> list[DeviceActivity]:
        """Flush (forced: every record of the session is delivered before this returns),
        disable the kinds and return the session's records, sorted by start. Raises
        :class:`RecordsNotTrusted` when records arrived before this flush."""
        early = len(self._raw)  # delivered while the block ran
        self._raw.clear()
        try:
            self._own_flush()
        finally:
            for k in self._kinds:
                self._disable(k)
        raw = list(self._raw)
        self._raw.clear()
        if early:
            raise RecordsNotTrusted(f"{early} activity record(s) were delivered before the recorder's closing "
                                    "flush (a full buffer, or a flush or records that are not the recorder's)")
        return self._records(raw)

    def _records(self, raw: list) -> list[DeviceActivity]:
        names: dict[str, str] = {}  # this session's demangled names (no cache outlives it)
        out = []
        for k, name, s, e, sid, ck in raw:
            if k == self._k_kernel:
                d = names.get(name)
                if d is None:
                    d = names[name] = self._demangle(name)
                out.append(DeviceActivity(d, s, e, sid, "kernel"))
            elif k == self._k_memset:
                out.append(DeviceActivity("Memset", s, e, sid, "memset"))
            else:
                out.append(DeviceActivity(f"Memcpy {_MEMCPY_KINDS.get(ck, 'UNKNOWN')}", s, e, sid, "memcpy"))
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
