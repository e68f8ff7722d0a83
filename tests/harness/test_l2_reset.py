"""The persisting-L2 reset (harness/l2.py): what it asks the CUDA driver, in which order, with
which values, checked against a recording stand-in for libcuda (no GPU here; the device check
is bench/l2_persist_check.py); that a CPU worker never calls it; and that a candidate that
swaps or disables the worker's reset is reported as interposition."""
import ctypes

from solbench.harness import l2
from solbench.harness.l2 import AccessPolicyWindow, PersistingL2Reset, StreamAttrValue, window


class FakeDriver:
    """Records the driver calls (name, arguments); ``fail`` maps a function to its CUresult."""

    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail or {}
        for name in ("cuCtxSetLimit", "cuCtxResetPersistingL2Cache", "cuStreamSetAttribute",
                     "cuStreamGetAttribute", "cuCtxGetLimit"):
            setattr(self, name, self._fn(name))

    def _fn(self, name):
        def f(*args):
            if name == "cuStreamSetAttribute":
                stream, attr, ptr = args
                w = ctypes.cast(ptr, ctypes.POINTER(StreamAttrValue)).contents.accessPolicyWindow
                args = (stream.value, attr, (w.base_ptr, w.num_bytes, w.hitRatio, w.hitProp, w.missProp))
            self.calls.append((name, args))
            return self.fail.get(name, 0)
        return f


def test_layouts_match_cuda_h():
    # cuda.h: CUaccessPolicyWindow {void*, size_t, float, enum, enum} = 8 + 8 + 4 + 4 + 4 -> 32
    # with 8-byte alignment; CUlaunchAttributeValue is a 64-byte union
    assert ctypes.sizeof(AccessPolicyWindow) == 32 and ctypes.sizeof(StreamAttrValue) == 64
    assert AccessPolicyWindow.num_bytes.offset == 8 and AccessPolicyWindow.hitRatio.offset == 16
    assert (l2.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, l2.CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW) == (6, 1)
    w = window(0x1000, 4096, 1.0, l2.CU_ACCESS_PROPERTY_PERSISTING).accessPolicyWindow
    assert (w.base_ptr, w.num_bytes, w.hitRatio, w.hitProp, w.missProp) == (0x1000, 4096, 1.0, 2, 1)


def test_reset_order_and_values():
    drv = FakeDriver()
    r = PersistingL2Reset(lib=drv)
    assert r.available and r(0xABC) is True and r.errors == {}
    # limit 0 first (no set-aside part), then the persisting lines back to normal, then the
    # stream's window cleared (num_bytes 0, hitRatio 0), all before the flush that follows
    assert drv.calls == [("cuCtxSetLimit", (6, 0)), ("cuCtxResetPersistingL2Cache", ()),
                         ("cuStreamSetAttribute", (0xABC, 1, (None, 0, 0.0, 0, 1)))]


def test_a_failed_step_is_recorded_and_the_others_still_run():
    # a GPU without persisting L2 (before Ampere) or MPS refuses the limit (CUDA_ERROR_* 1)
    drv = FakeDriver(fail={"cuCtxSetLimit": 1})
    r = PersistingL2Reset(lib=drv)
    assert r(None) is False and r.errors == {"limit": 1}
    assert [c[0] for c in drv.calls] == ["cuCtxSetLimit", "cuCtxResetPersistingL2Cache", "cuStreamSetAttribute"]
    assert drv.calls[-1][1][0] is None  # None: the legacy default stream (0)


def test_cpu_reset_is_inert():
    r = PersistingL2Reset.for_device(False)
    assert not r.available and r(0) is False and r.state(0) is None


def test_cpu_worker_flush_never_resets_and_a_swapped_reset_is_interposition():
    from solbench.harness.worker import Worker

    w = Worker(None, "cpu")
    calls = []
    assert "_l2" in vars(w) and not w._l2.available
    w._flush(1)  # no flush buffer loaded, no CUDA: nothing to do, nothing called
    assert w._interposition() == []
    w._l2 = lambda stream: calls.append(stream) or True  # what a candidate reaching it would do
    assert any("persisting-L2 reset" in x for x in w._interposition())
    w._flush(1)
    assert calls == []  # the CPU path never calls it
