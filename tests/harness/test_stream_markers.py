"""The CUDA-only ("streams") marker method's segmentation (pure), on synthetic timelines
worked out by hand: the flush and end marker are the fills on the worker's own marker
stream, in the order flush, end, flush, ..., closing flush; the copy-out is what runs on its
copy stream; anything else on the marker stream, or another count or order, fails (the
caller falls back to CUDA events, as for ranges that do not match)."""

import pytest

from solbench.harness.config import EvalConfig
from solbench.harness.timing import DeviceActivity as A
from solbench.harness.timing import MARKER_METHODS, segment, stream_segmentation

US = 1_000  # ns per microsecond
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
COPY = "void at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
M, C, S0, S1 = 40, 41, 7, 13  # marker stream, copy stream, the candidate's streams


def _fill(t0, t1, stream=M):
    return A(FILL, t0 * US, t1 * US, stream=stream)


def _timeline():
    """Two iterations (us). Marker stream: flush [0, 30], end [100, 101], flush [200, 230],
    end [300, 301], closing flush [400, 430].
    it0: k1 s7 [40, 60], k2 s13 [50, 90] -> span 50, kernel sum 60; copy-out on the copy
         stream [110, 120] (not late); a kernel on s7 after the end [130, 135]: late 5.
    it1: k1 s7 [240, 250] -> span 10; copy-out [310, 315]; a foreign kernel on the copy
         stream [320, 322] (late_all only)."""
    return [
        _fill(0, 30), _fill(100, 101), _fill(200, 230), _fill(300, 301), _fill(400, 430),
        A("k1", 40 * US, 60 * US, stream=S0), A("k2", 50 * US, 90 * US, stream=S1),
        A(COPY, 110 * US, 120 * US, stream=C), A("hook", 130 * US, 135 * US, stream=S0),
        A("k1", 240 * US, 250 * US, stream=S0),
        A("Memcpy DtoD (Device -> Device)", 310 * US, 315 * US, stream=C, kind="memcpy"),
        A("my_hook_kernel", 320 * US, 322 * US, stream=C),
    ]


def test_honest_timeline_by_hand():
    seg, others = stream_segmentation(_timeline(), 2, M, C)
    assert seg.ok, seg.reason
    assert seg.span_ms == pytest.approx([0.050, 0.010])
    assert seg.kernel_sum_ms == pytest.approx([0.060, 0.010])
    assert seg.kernel_sets == [("k1", "k2"), ("k1",)]
    # late_ms: after the end marker, off the copy stream (the hook on s7; as with ranges, all
    # of the copy-out is left out); late_all_ms also keeps the copy stream's work that is not
    # a copy / fill / memcpy of PyTorch's (the foreign kernel of it1)
    assert seg.late_ms == pytest.approx([0.005, 0.0])
    assert seg.late_all_ms == pytest.approx([0.005, 0.002])
    assert all(a.stream != M for a in others)


def test_same_figures_as_the_ranges_method_on_the_same_timeline():
    # the ranges method's segment() given the same flushes and ends as found by ranges
    acts = [a for a in _timeline() if a.stream != M]
    fl = [a for a in _timeline() if a.stream == M][0::2]
    en = [a for a in _timeline() if a.stream == M][1::2]
    ref = segment(fl, acts, 2, en)
    seg, _ = stream_segmentation(_timeline(), 2, M, C)
    assert (seg.span_ms, seg.kernel_sum_ms, seg.kernel_sets) == (ref.span_ms, ref.kernel_sum_ms, ref.kernel_sets)


def test_the_candidates_work_on_the_marker_stream_fails_the_segmentation():
    acts = _timeline() + [A("k_on_marker", 45 * US, 55 * US, stream=M)]
    seg, _ = stream_segmentation(acts, 2, M, C)
    assert not seg.ok and "not the harness's on its marker stream" in seg.reason


def test_a_forged_fill_on_the_marker_stream_fails_on_the_count():
    # a fill inside call 0 (a candidate that found the stream and fakes an early end marker)
    seg, _ = stream_segmentation(_timeline() + [_fill(45, 46)], 2, M, C)
    assert not seg.ok and "found 6 fills on the marker stream, expected 5" in seg.reason


def test_an_order_that_is_not_flush_end_alternating_fails():
    acts = [a for a in _timeline() if a.stream != M] + [
        _fill(0, 30), _fill(100, 140), _fill(200, 201), _fill(300, 301), _fill(400, 430)]
    seg, _ = stream_segmentation(acts, 2, M, C)
    assert not seg.ok and "marker 1" in seg.reason and "not an end marker" in seg.reason


def test_pieces_of_one_fill_merge_and_without_a_copy_stream_late_work_is_not_judged():
    # the first flush in two pieces 1 us apart (< 2 us): one flush
    acts = [a for a in _timeline() if not (a.stream == M and a.start_ns == 0)] + [_fill(0, 14), _fill(15, 30)]
    seg, _ = stream_segmentation(acts, 2, M, C)
    assert seg.ok and seg.span_ms == pytest.approx([0.050, 0.010])
    seg, _ = stream_segmentation(_timeline(), 2, M, None)
    assert seg.ok and seg.late_ms is None and "copy stream unknown" in seg.reason


def test_the_setting_defaults_to_ranges_and_is_checked():
    assert MARKER_METHODS == ("ranges", "streams")
    assert EvalConfig().cupti_markers == "streams"
    assert EvalConfig(cupti_markers="streams").cupti_markers == "streams"
    with pytest.raises(ValueError, match="cupti_markers"):
        EvalConfig(cupti_markers="cuda")
