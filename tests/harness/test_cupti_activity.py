"""harness/cupti_activity.py on the CPU: cupti-python's API is replaced by a stand-in with the
same calls (``activity_register_callbacks``, ``activity_enable``/``disable``,
``activity_flush_all``, ``get_stream_id_ex``, ``ActivityKind``) that hands CUPTI-like records
to the registered callback as CUPTI does: when a buffer fills, and at a forced flush. The
real library runs on the GPU (bench/gpu_session.sh ``eval``/``agree``)."""

import enum
import sys
import types
from types import SimpleNamespace as R

import pytest

from solbench.harness import cupti_activity
from solbench.harness.timing import is_harness_activity, stream_segmentation

US = 1_000
#: PyTorch's fill kernel as CUPTI reports it (mangled) and as c++filt prints it
FILL_MANGLED = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
M, C, S0 = 40, 41, 7


class _Kind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    CONCURRENT_KERNEL = 10
    MEMCPY2 = 22


class _FakeCupti:
    """CUPTI's activity API as cupti-python exposes it, with a device timeline to deliver."""

    ActivityKind = _Kind

    def __init__(self):
        self.enabled: set[int] = set()
        self.pending: list = []
        self.cb = None
        self.flushes = 0

    def activity_register_callbacks(self, requested, completed):
        self.cb = (requested, completed)

    def activity_enable(self, k):
        self.enabled.add(int(k))

    def activity_disable(self, k):
        self.enabled.discard(int(k))

    def activity_flush_all(self, flag):
        self.flushes += 1
        if self.pending:
            size, _ = self.cb[0]()
            assert size == cupti_activity.BUFFER_BYTES
            self.cb[1](self.pending)
            self.pending = []

    def get_stream_id_ex(self, ctx, handle, per_thread):
        return {0xA: M, 0xB: C}[handle]

    def launch(self, rec):
        """The device ran ``rec``: recorded if its kind is enabled."""
        if int(rec.kind) in self.enabled:
            self.pending.append(rec)


@pytest.fixture
def fake(monkeypatch):
    f = _FakeCupti()
    pkg = types.ModuleType("cupti")
    pkg.cupti = f
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    monkeypatch.setitem(sys.modules, "cupti.cupti", f)
    monkeypatch.setattr(cupti_activity, "_session", None)
    return f


def _kernel(name, t0, t1, stream):
    return R(kind=_Kind.CONCURRENT_KERNEL, name=name, start=t0 * US, end=t1 * US, stream_id=stream)


def test_records_of_a_session_become_device_activities(fake):
    s = cupti_activity.open_session()
    assert cupti_activity.open_session() is s  # one per process: CUPTI's callbacks are
    fake.launch(_kernel("before", 0, 1, S0))  # nothing enabled yet: not recorded
    s.start()
    assert fake.enabled == {1, 2, 10, 22}
    fake.launch(_kernel(FILL_MANGLED, 10, 40, M))
    fake.launch(_kernel("triton_red_fused_0", 50, 70, S0))
    fake.launch(R(kind=_Kind.MEMSET, start=80 * US, end=81 * US, stream_id=S0))
    fake.launch(R(kind=_Kind.MEMCPY, start=90 * US, end=95 * US, stream_id=C, copy_kind=8))
    acts = s.stop()
    assert fake.enabled == set()
    fake.launch(_kernel("after", 200, 201, S0))
    assert [(a.name, a.start_ns, a.end_ns, a.stream, a.kind) for a in acts] == [
        (FILL, 10 * US, 40 * US, M, "kernel"),
        ("triton_red_fused_0", 50 * US, 70 * US, S0, "kernel"),
        ("Memset", 80 * US, 81 * US, S0, "memset"),
        ("Memcpy DtoD", 90 * US, 95 * US, C, "memcpy"),
    ]
    # the demangled fill is the harness's, as in a torch.profiler session
    assert is_harness_activity(acts[0].name, acts[0].kind)
    assert not is_harness_activity(acts[1].name, acts[1].kind)
    assert s.stream_id(0xA) == M and s.stream_id(0xB) == C


def test_demangling_matches_cxxfilt():
    import shutil
    import subprocess

    names = [FILL_MANGLED, "_ZN7cutlass7Kernel2I57cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4EEvNT_6ParamsE",
             "triton_poi_fused_add_0", "_Z", "ampere_sgemm_128x64_nn"]
    d = cupti_activity._Demangler()
    got = [d(n) for n in names]
    assert got[0] == FILL
    assert got[2:] == names[2:]  # not mangled names, or not demangled: kept as they are
    if shutil.which("c++filt"):
        want = subprocess.run(["c++filt"], input="\n".join(names[:2]), capture_output=True,
                              text=True).stdout.split("\n")[:2]
        assert got[:2] == want


def test_a_session_segments_as_the_stream_method_expects(fake):
    """One timed block of two calls (us): marker-stream fills flush [0, 30], end [100, 101],
    flush [200, 230], end [300, 301], closing flush [400, 430]; the call's kernels on s7
    [40, 60] and [240, 250]; a copy-out on the copy stream [110, 120]: spans 20 and 10 us."""
    s = cupti_activity.open_session()
    s.start()
    for t0, t1 in ((0, 30), (100, 101), (200, 230), (300, 301), (400, 430)):
        fake.launch(_kernel(FILL_MANGLED, t0, t1, M))
    fake.launch(_kernel("k", 40, 60, S0))
    fake.launch(_kernel("k", 240, 250, S0))
    fake.launch(R(kind=_Kind.MEMCPY, start=110 * US, end=120 * US, stream_id=C, copy_kind=8))
    seg, _ = stream_segmentation(s.stop(), 2, M, C)
    assert seg.ok, seg.reason
    assert seg.span_ms == pytest.approx([0.020, 0.010])
    assert seg.late_ms == pytest.approx([0.0, 0.0])


def test_a_buffer_delivered_inside_the_block_is_not_used(fake):
    """A buffer handed back while the block runs (full, or flushed by someone else) cannot be
    told from records a candidate edited (tests/harness/test_red_s22.py): the block's records
    are refused (its CUDA events time it), and the next block is recorded as usual."""
    s = cupti_activity.open_session()
    s.start()
    fake.launch(_kernel("k", 0, 5, S0))
    fake.activity_flush_all(0)  # a full buffer, handed back while the block runs
    fake.launch(_kernel("k", 10, 15, S0))
    with pytest.raises(cupti_activity.RecordsNotTrusted, match="1 activity record"):
        s.stop()
    s.start()
    fake.launch(_kernel("k", 20, 25, S0))
    assert [a.start_ns for a in s.stop()] == [20 * US]


def test_leftovers_of_an_earlier_session_are_dropped(fake):
    s = cupti_activity.open_session()
    s.start()
    fake.launch(_kernel("old", 0, 5, S0))
    # a session that ended without stop() (its worker's request failed)
    fake.enabled.clear()
    s.start()
    fake.launch(_kernel("new", 10, 15, S0))
    assert [a.name for a in s.stop()] == ["new"]


def test_without_cupti_python_open_session_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    monkeypatch.setattr(cupti_activity, "_session", None)
    with pytest.raises(ImportError):
        cupti_activity.open_session()


def test_the_pinned_attribute_lists_fit_the_guard_table_reply():
    """The worker's pinned attributes and its CUPTI recorder's each fit an InstanceEntry
    (a longer list makes the guard table reply invalid and the parent's memory read is lost)."""
    from solbench.harness import protocol, worker

    assert len(worker._PINNED) <= protocol.MAX_PINNED
    assert len(worker._ACTS_PINNED) <= protocol.MAX_PINNED
    assert "_acts" in worker._PINNED
