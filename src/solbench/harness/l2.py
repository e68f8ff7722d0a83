"""Persisting-L2 reset before every timed iteration (CUDA; threats.md principle 8: both sides
reach the same steady state before every timed call).

Since Ampere a CUDA context can set aside part of the L2 for *persisting* accesses
(``cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes)``) and mark an address range of a
stream's accesses persisting (the stream's access-policy window,
``cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, ...)``). Lines in the
set-aside part are not evicted by normal accesses, so the harness's flush (a write of 2x the
L2) would leave a candidate's inputs cached from one timed call to the next: a warm-cache
time against the reference's cold one. CUDA C++ Programming Guide, "Device Memory L2 Access
Management" (sections L2 cache set-aside, L2 access policy, "Reset L2 Access to Normal").

So before each timed iteration's flush, in trusted code, the worker:

1. sets the context's persisting-L2 limit to 0 (no set-aside part);
2. resets every persisting line to normal (``cuCtxResetPersistingL2Cache``), so the flush
   that follows evicts it;
3. clears the access-policy window of the stream the calls and the flush run on (num_bytes
   0), so the flush's own writes are not persisting either.

**Which process.** The limit and the persisting lines belong to a CUDA context, and a context
belongs to one process; the access-policy window is an attribute of a stream of that process.
The parent has its own context (or none) and cannot reach the candidate's, so the reset must
run in the process the candidate's kernels run in: the worker, between the candidate's call
and the next flush (the candidate cannot run then: the worker's main thread is the harness's,
and threads left running are ``background_thread``). The reference's worker runs the same
code, so both sides are treated alike. A candidate may set a window again inside its own
call: that can only help the data it touches within that call, never carry a cache across
calls, because the reset and the flush run before every call.

The calls go through the CUDA driver API (``libcuda.so.1``, present wherever CUDA runs; the
runtime's ``libcudart`` soname changes with the toolkit), on the primary context that PyTorch's
runtime made current on the worker's thread. Constants from ``cuda.h``:
``CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06``, ``CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1``
(the stream attribute of the same value), ``CUaccessPolicyWindow`` {base_ptr, num_bytes,
hitRatio, hitProp, missProp}, ``CUlaunchAttributeValue`` a 64-byte union.

On the CPU nothing is done (:meth:`PersistingL2Reset.for_device` returns a reset whose
``available`` is False and whose call does nothing). ``bench/l2_persist_check.py`` proves on a
GPU that a candidate setting a persisting window on its inputs reads no faster than without.
"""

from __future__ import annotations

import ctypes

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
CU_ACCESS_PROPERTY_NORMAL = 0
CU_ACCESS_PROPERTY_STREAMING = 1
CU_ACCESS_PROPERTY_PERSISTING = 2


class AccessPolicyWindow(ctypes.Structure):
    """``CUaccessPolicyWindow`` / ``cudaAccessPolicyWindow`` (cuda.h): 32 bytes on x86-64."""

    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class StreamAttrValue(ctypes.Union):
    """``CUstreamAttrValue`` (= ``CUlaunchAttributeValue``): a 64-byte union whose first
    member used here is the access-policy window."""

    _fields_ = [("pad", ctypes.c_char * 64), ("accessPolicyWindow", AccessPolicyWindow)]


def window(base_ptr: int = 0, num_bytes: int = 0, hit_ratio: float = 0.0,
           hit_prop: int = CU_ACCESS_PROPERTY_NORMAL,
           miss_prop: int = CU_ACCESS_PROPERTY_STREAMING) -> StreamAttrValue:
    """A stream attribute value holding one access-policy window (the default, num_bytes 0,
    is no window: every access normal)."""
    v = StreamAttrValue()
    w = v.accessPolicyWindow
    w.base_ptr, w.num_bytes, w.hitRatio = base_ptr or None, num_bytes, hit_ratio
    w.hitProp, w.missProp = hit_prop, miss_prop
    return v


def _driver():
    """The CUDA driver library, or None where it cannot be loaded (no GPU driver)."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


class PersistingL2Reset:
    """The reset of the module doc, bound at construction (later changes to module globals,
    e.g. by a candidate, do not reach it; the worker keeps the instance).

    ``available``: the driver functions were found; ``errors``: per failed step the last
    CUresult seen (a GPU without persisting-L2 support answers the limit with an error, and
    there is then nothing to reset)."""

    def __init__(self, lib=None):
        self.available = False
        self.errors: dict[str, int] = {}
        self._zero = window()
        if lib is False:  # inert (CPU worker)
            return
        lib = lib if lib is not None else _driver()
        if lib is None:
            return
        try:
            self._set_limit = lib.cuCtxSetLimit
            self._set_limit.argtypes = (ctypes.c_int, ctypes.c_size_t)
            self._reset = lib.cuCtxResetPersistingL2Cache
            self._reset.argtypes = ()
            self._set_attr = lib.cuStreamSetAttribute
            self._set_attr.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(StreamAttrValue))
            self._get_attr = lib.cuStreamGetAttribute
            self._get_attr.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(StreamAttrValue))
            self._get_limit = lib.cuCtxGetLimit
            self._get_limit.argtypes = (ctypes.POINTER(ctypes.c_size_t), ctypes.c_int)
        except AttributeError:
            return
        for f in (self._set_limit, self._reset, self._set_attr, self._get_attr, self._get_limit):
            f.restype = ctypes.c_int
        self.available = True

    @classmethod
    def for_device(cls, is_cuda: bool) -> "PersistingL2Reset":
        """The reset for a worker: a real one on CUDA, an inert one (``available`` False,
        its call a no-op) on the CPU, where no driver is loaded."""
        return cls() if is_cuda else cls(lib=False)

    def __call__(self, stream: int | None) -> bool:
        """Reset the limit, the persisting lines and ``stream``'s window (a raw
        ``cudaStream_t``; 0 or None: the legacy default stream). True when every step
        succeeded; never raises."""
        if not self.available:
            return False
        ok = True
        for name, rc in (("limit", self._set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0)),
                         ("reset", self._reset()),
                         ("window", self._set_attr(ctypes.c_void_p(stream or 0),
                                                   CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                                   ctypes.byref(self._zero)))):
            if rc != 0:
                self.errors[name] = rc
                ok = False
        return ok

    def state(self, stream: int | None) -> dict | None:
        """The context's persisting-L2 limit (bytes) and ``stream``'s window size (bytes), or
        None when unavailable: what the device check reads back."""
        if not self.available:
            return None
        lim = ctypes.c_size_t(0)
        v = StreamAttrValue()
        rc1 = self._get_limit(ctypes.byref(lim), CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        rc2 = self._get_attr(ctypes.c_void_p(stream or 0), CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                             ctypes.byref(v))
        return {"limit_bytes": lim.value if rc1 == 0 else None,
                "window_bytes": v.accessPolicyWindow.num_bytes if rc2 == 0 else None,
                "rc": [rc1, rc2]}
