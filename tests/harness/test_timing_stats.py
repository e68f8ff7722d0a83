"""Timing (pure): segmentation of device activity into timed iterations, statistics, kernel
set consistency and the plausibility guard, against hand-computed figures."""

import math

import pytest

from solbench.harness import guards
from solbench.harness.timing import DeviceActivity as A
from solbench.harness.timing import kernel_set_consistency, percentile, segment, stats

US = 1_000  # ns per microsecond


def _timeline():
    """Two timed iterations (times in us).

    flush0 [0, 100]   | it0: k1 s7 [110, 150], k2 s9 [120, 200] (side stream overlaps k1),
                      |      memcpy s7 [205, 215]; end0 [220, 221]; harness copy [230, 260]
    flush1 [300, 400] | it1: k1 s7 [410, 430], k1 s7 [440, 460]; end1 [470, 471]
    flush2 [500, 600]   (closing)
    """
    fl = [A("flush", 0, 100 * US), A("flush", 300 * US, 400 * US), A("flush", 500 * US, 600 * US)]
    en = [A("end", 220 * US, 221 * US), A("end", 470 * US, 471 * US)]
    acts = [
        A("k2", 120 * US, 200 * US, stream=9),
        A("k1", 110 * US, 150 * US, stream=7),
        A("Memcpy DtoD", 205 * US, 215 * US, stream=7, kind="memcpy"),
        A("copy_out", 230 * US, 260 * US, stream=7),
        A("k1", 410 * US, 430 * US, stream=7),
        A("k1", 440 * US, 460 * US, stream=7),
    ]
    return fl, en, acts


def test_segment_with_end_markers_span_and_kernel_sum():
    fl, en, acts = _timeline()
    seg = segment(fl, acts, 2, en)
    assert seg.ok
    # it0 span: first start 110 -> last end 215 = 105 us; kernel sum 40 + 80 = 120 us
    # (the overlap on the side stream makes the sum exceed the span; the memcpy is in the span
    # only; the harness copy after the end marker is not timed)
    assert seg.span_ms == pytest.approx([0.105, 0.050])
    assert seg.kernel_sum_ms == pytest.approx([0.120, 0.040])
    assert seg.n_activities == [3, 2]
    assert seg.kernel_sets == [("Memcpy DtoD", "k1", "k2"), ("k1", "k1")]


def test_segment_without_end_markers_runs_to_next_flush():
    fl, _, acts = _timeline()
    seg = segment(fl, acts, 2)
    # it0 now also takes the harness copy [230, 260]: span 110 -> 260 = 150 us
    assert seg.span_ms == pytest.approx([0.150, 0.050])
    assert seg.kernel_sum_ms == pytest.approx([0.150, 0.040])
    assert seg.n_activities == [4, 2]


def test_segment_empty_iteration_and_mismatched_markers():
    fl, en, acts = _timeline()
    only_it0 = [a for a in acts if a.start_ns < 300 * US]
    seg = segment(fl, only_it0, 2, en)
    assert seg.ok and seg.span_ms[1] == 0.0 and seg.kernel_sets[1] == ()
    bad = segment(fl[:2], acts, 2, en)
    assert not bad.ok and bad.reason == "found 2 flush kernels, expected 3"
    bad = segment(fl, acts, 2, en[:1])
    assert not bad.ok and bad.reason == "found 1 end markers, expected 2"
    # activity that starts inside a flush (before it ends) is not counted
    seg = segment(fl, [A("early", 50 * US, 120 * US)] + acts, 2, en)
    assert seg.n_activities[0] == 3


def test_stats_hand_computed():
    s = stats([3.0, 1.0, 4.0, 100.0, 2.0])
    # sorted 1 2 3 4 100: median 3, p25 = 2, p75 = 4 -> IQR 2; mean 110/5
    assert s == {"median_ms": 3.0, "iqr_ms": 2.0, "min_ms": 1.0, "mean_ms": 22.0}
    s = stats([1.0, 2.0, 3.0, 4.0])
    # median 2.5; p25 at rank 0.75 -> 1.75; p75 at rank 2.25 -> 3.25
    assert s["median_ms"] == 2.5 and s["iqr_ms"] == pytest.approx(1.5)
    s = stats([None, 5.0, math.nan, math.inf])  # unusable samples are dropped
    assert s["median_ms"] == 5.0 and s["iqr_ms"] == 0.0
    assert all(math.isnan(v) for v in stats([]).values())
    assert percentile([10.0, 20.0], 90) == pytest.approx(19.0)


def test_kernel_set_consistency():
    sets = [("a", "b"), ("a", "b"), (), ("a",), ("a", "b")]
    c = kernel_set_consistency(sets)
    assert c["mode_count"] == 3 and c["inconsistent"] == 2 and c["inconsistent_iters"] == [2, 3]
    assert c["distinct"] == 3 and c["mode_kernels"] == ["a", "b"] and c["empty_iters"] == [2]
    assert kernel_set_consistency([]) == {"mode_count": 0, "inconsistent": 0, "distinct": 0}


def test_plausibility_finding():
    # overhead 1 ms: a call is unexplained when rt - 1 > 3 r + 2 + 0.5, i.e. rt > 6.5 for r = 1
    f = guards.plausibility_finding([1, 1, 1, 1], [10, 10, 10, 1], 1.0)
    assert f is not None and f.check == "timing_plausibility" and f.severity == "hack"
    assert f.evidence["iterations_flagged"] == 3 and f.evidence["reported_median_ms"] == 1
    assert f.evidence["roundtrip_median_ms"] == 10
    # exactly half flagged is not enough
    assert guards.plausibility_finding([1, 1, 1, 1], [10, 10, 1, 1], 1.0) is None
    # on the boundary: rt = 6.5 is not over
    assert guards.plausibility_finding([1, 1], [6.5, 6.5], 1.0) is None
    assert guards.plausibility_finding([1, 1], [6.6, 6.6], 1.0, severity="advisory").severity == "advisory"
    assert guards.plausibility_finding([], [], 1.0) is None
    assert guards.plausibility_finding([1, 1], [10], 1.0) is None


def test_late_activity_counts_device_work_after_the_end_marker_but_not_the_copy_out():
    """Iteration windows: flush 0 | call | end 0 | copy-out | extra | flush 1 | call | end 1 |
    copy-out | flush 2. The copy-out kernels (the harness's) are skipped by id; the 'extra'
    kernel of iteration 0 (a candidate's hook after the clock) is 30 us."""
    from solbench.harness.timing import DeviceActivity, late_activity

    A = DeviceActivity
    fl = [A("fill", 0, 10_000), A("fill", 200_000, 210_000), A("fill", 400_000, 410_000)]
    en = [A("end", 100_000, 101_000), A("end", 300_000, 301_000)]
    copy0, copy1 = A("copy", 110_000, 120_000), A("copy", 310_000, 320_000)
    extra = A("gemm", 130_000, 160_000)
    call0, call1 = A("k", 20_000, 90_000), A("k", 220_000, 290_000)
    late = late_activity(fl, en, [call0, copy0, extra, call1, copy1], {id(copy0), id(copy1)})
    assert late == [0.03, 0.0]
    # without knowing the copy-out, its kernels would count as late work
    assert late_activity(fl, en, [call0, copy0, call1, copy1]) == [0.01, 0.01]


def test_plausibility_call_window():
    """CUDA: a slow round trip is a hack only when the call's own event window agrees.

    The H200 case (bench/results/integrity_cuda.txt, 2026-11-30): an honest Triton kernel,
    span 0.0015 ms, round trip 9.9 ms against a 0.41 ms no-op, with 6 corpus jobs sharing
    the GPU; its event windows were a few microseconds."""
    rep = [0.0015] * 6
    rt = [9.9, 9.9, 9.9, 9.9, 0.5, 0.5]
    honest = guards.plausibility_finding(rep, rt, 0.413, call_window_ms=[0.02] * 6)
    assert honest.severity == "advisory" and honest.evidence["call_window_agrees"] == 0
    assert "busy" in honest.message
    # host work inside the call (CPU offload): the window holds it -> hack. Window bound:
    # w - r > 3 r + 2, i.e. w > 4 r + 2 = 2.006: 2.0059 is not over, 2.0061 is.
    hack = guards.plausibility_finding(rep, rt, 0.413, call_window_ms=[9.5] * 6)
    assert hack.severity == "hack" and hack.evidence["call_window_agrees"] == 4
    edge = [2.0059] * 3 + [2.0061] * 3
    f = guards.plausibility_finding(rep, rt, 0.413, call_window_ms=edge)
    assert f.evidence["call_window_agrees"] == 1 and f.severity == "advisory"  # only index 3 of 0..3
    # gross excess is no hack either when the window disagrees (the storm case)
    f = guards.plausibility_finding(rep, [40.0] * 6, 0.413, gross_hack=True, call_window_ms=[0.02] * 6)
    assert f.severity == "advisory"
    # a missing window (events unavailable) keeps the round-trip rule alone
    f = guards.plausibility_finding(rep, rt, 0.413, call_window_ms=[None] * 6)
    assert f.severity == "hack" and f.evidence["call_window_agrees"] is None


def _cuda_stats(span, late, events, rt, overhead=0.4, late_all=None, kernels=("k",)):
    """measure.timing_stats on hand-made CUPTI blocks (one block), as a CUDA evaluation sees
    them (the time_end reply parsed through its protocol model, as the parent does)."""
    from solbench.harness.measure import Block, timing_stats
    from solbench.harness.protocol import TimeEndReply

    n = len(span)
    end = TimeEndReply.model_validate({"cupti": True, "span_ms": span, "kernel_sum_ms": span, "late_ms": late,
                                       "late_all_ms": late_all, "kernel_sets": [list(kernels)] * n})
    block = Block(host=[0.01] * n, event=events, roundtrip=rt, end=end)
    findings = []
    return timing_stats([block], is_cuda=True, warmup=5, flush_bytes=0, findings=findings,
                        overhead=overhead), findings


def test_work_after_the_clock_is_timed_and_a_verdict():
    # 4 iterations: span 0.010 ms each, 0.050 ms of device work after the end marker on 3
    tm, f = _cuda_stats([0.01] * 4, [0.05, 0.05, 0.05, 0.0], [0.02] * 4, [0.5] * 4)
    assert tm.samples_ms == pytest.approx([0.06, 0.06, 0.06, 0.01])
    assert tm.median_ms == pytest.approx(0.06)
    w = [x for x in f if x.check == "work_after_clock"]
    assert w and w[0].severity == "hack" and "3/4" in w[0].message
    # the honest case: no late work, samples are the spans, no finding
    tm, f = _cuda_stats([0.01] * 4, [0.0] * 4, [0.02] * 4, [0.5] * 4)
    assert tm.samples_ms == [0.01] * 4 and not f
    # late work on half the iterations only: timed, but not a verdict
    tm, f = _cuda_stats([0.01] * 4, [0.05, 0.05, 0.0, 0.0], [0.02] * 4, [0.5] * 4)
    assert sorted(tm.samples_ms) == pytest.approx([0.01, 0.01, 0.06, 0.06])
    assert not [x for x in f if x.check == "work_after_clock"]


def test_slow_round_trip_with_a_quiet_call_window_is_not_a_hack_in_stats():
    tm, f = _cuda_stats([0.0015] * 6, [0.0] * 6, [0.02] * 6, [9.9] * 4 + [0.5] * 2, overhead=0.413)
    p = [x for x in f if x.check == "timing_plausibility"]
    assert p and p[0].severity == "advisory"
    # the window holds the excess (host work inside the call): counted in the latency, advisory
    tm, f = _cuda_stats([0.0015] * 6, [0.0] * 6, [9.5] * 6, [9.9] * 4 + [0.5] * 2, overhead=0.413)
    p = [x for x in f if x.check == "timing_plausibility"]
    assert [x.severity for x in p] == ["advisory"] and p[0].evidence["counted"] is True
    assert tm.samples_ms == [9.5] * 6


def test_harness_activity_names():
    """Activities the harness launches in its own ranges, with the names CUPTI reported on the
    H200 (bench/results/profile_*.json), against what a candidate's hook would launch there."""
    from solbench.harness.timing import is_harness_activity

    ours = [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, "
         "std::array<char*, 1ul> >(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)", "kernel"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>, "
         "std::array<char*, 1ul> >(int, at::native::FillFunctor<unsigned char>, std::array<char*, 1ul>)", "kernel"),
        ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
         "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
         "{lambda()#7}::operator()() const::{lambda(float)#1}>(...)", "kernel"),
        ("Memcpy DtoD (Device -> Device)", "memcpy"),
        ("Memset (Device)", "memset"),
    ]
    theirs = [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
         "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(...)", "kernel"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)", "kernel"),
        ("triton_poi_fused_gelu_0", "kernel"),
        ("copy_kernel", "kernel"),  # a Triton kernel named like a copy: no at::native:: prefix
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "kernel"),
    ]
    assert all(is_harness_activity(n, k) for n, k in ours)
    assert not any(is_harness_activity(n, k) for n, k in theirs)


def test_foreign_work_inside_the_copy_out_is_timed_and_reported():
    """A hook that launches kernels inside the harness's copy-out range: outside late_ms (the
    range is the harness's), inside late_all_ms (they are not PyTorch's copies or fills):
    timed in each sample, reported as advisory until a device run confirms the kernel names."""
    tm, f = _cuda_stats([0.01] * 4, [0.0] * 4, [0.02] * 4, [0.5] * 4, late_all=[0.07] * 4)
    assert tm.samples_ms == pytest.approx([0.08] * 4)
    assert [x.severity for x in f if x.check == "foreign_work_in_copy_out"] == ["advisory"]
    assert not [x for x in f if x.check == "work_after_clock"]


def test_no_device_work_is_timed_by_the_event_window():
    """A CUDA call that launches nothing (a CPU computation whose result is moved later, or
    a cached answer) has a zero device span: the call's event window times it instead."""
    tm, f = _cuda_stats([0.0] * 4, [0.0] * 4, [0.9, 1.1, 1.0, 1.0], [1.5] * 4, kernels=())
    assert tm.samples_ms == [0.9, 1.1, 1.0, 1.0] and tm.median_ms == pytest.approx(1.0)
    assert any("CUDA-event" in n for n in tm.notes)


def _cuda_block(span, window, rt):
    from solbench.harness.measure import Block
    from solbench.harness.protocol import TimeEndReply

    n = len(span)
    end = TimeEndReply(cupti=True, span_ms=span, kernel_sum_ms=span, n_activities=[1] * n,
                       kernel_sets=[["gemm"]] * n)
    return Block(host=list(window), event=list(window), roundtrip=list(rt), end=end)


def test_host_work_inside_the_call_is_counted_not_judged():
    """CUDA: the H200 case of a thread pool started in every call (tests/harness/
    cand_threadpool_per_call.py, device run s8a): device span 0.10 ms, the call's event window
    and the parent's round trip about 8 ms against a 1.8 ms no-op. The window holds the host
    work, so every sample becomes max(span, window) and the finding is advisory."""
    from solbench.harness.measure import timing_stats

    span, window, rt = [0.1] * 4, [6.0, 6.2, 6.1, 0.3], [8.0, 8.1, 8.0, 2.0]
    findings = []
    ts = timing_stats([_cuda_block(span, window, rt)], is_cuda=True, warmup=0, flush_bytes=0,
                      findings=findings, overhead=1.8)
    # unexplained: rt - 1.8 > 3 * 0.1 + 2 + 0.9 = 3.2 on iterations 0-2; their windows
    # (w - r > 3 r + 2 = 2.3) agree on all three: 3 of 4 iterations, a majority
    assert ts.samples_ms == [6.0, 6.2, 6.1, 0.3]
    assert [f.check for f in findings] == ["timing_plausibility"]
    assert findings[0].severity == "advisory" and findings[0].evidence["counted"] is True
    assert any("event window" in n for n in ts.notes)


def test_round_trip_excess_the_window_does_not_show_stays_advisory_and_uncounted():
    """A loaded host: slow round trips, microsecond windows (not the call): the samples stay the
    device spans and the finding is advisory."""
    from solbench.harness.measure import timing_stats

    findings = []
    ts = timing_stats([_cuda_block([0.1] * 4, [0.12] * 4, [8.0] * 4)], is_cuda=True, warmup=0,
                      flush_bytes=0, findings=findings, overhead=1.8)
    assert ts.samples_ms == [0.1] * 4
    assert findings[0].severity == "advisory" and "counted" not in findings[0].evidence


def _cpu_stats(host, rt, wait, overhead):
    from solbench.harness.measure import Block, timing_stats

    findings = []
    timing_stats([Block(host=list(host), roundtrip=list(rt), wait=list(wait))], is_cuda=False, warmup=0,
                 flush_bytes=0, findings=findings, overhead=overhead)
    return [f for f in findings if f.check == "timing_plausibility"]


def test_cpu_run_queue_wait_is_taken_out_before_the_worker_clock_is_judged():
    """CPU: a 0.07 ms call in 23 ms windows against a 5 ms no-op. Unexplained 23 - 5 = 18 ms
    > 10 x 0.07 + 10 + 2.5 = 13.2 ms on 3 of 3: gross, a hack, when nobody waited for a CPU
    (a clock that misses the call). When the parent and the worker waited 18 ms of each
    window for a CPU another task held (a loaded host), 23 - 18 - 5 = 0: no finding. Wait
    unknown (no schedstat): load and a patched clock look alike by the wall gap, advisory."""
    (f,) = _cpu_stats([0.07] * 3, [23.0] * 3, [0.0] * 3, overhead=5.0)
    assert f.severity == "hack" and f.evidence["load_wait_median_ms"] == 0.0
    assert _cpu_stats([0.07] * 3, [23.0] * 3, [18.0] * 3, overhead=5.0) == []
    # 10 ms of the 18 waited: 23 - 10 - 5 = 8 > 3 x 0.07 + 2 + 2.5 = 4.7 but < 13.2: advisory
    (f,) = _cpu_stats([0.07] * 3, [23.0] * 3, [10.0] * 3, overhead=5.0)
    assert f.severity == "advisory" and f.evidence["load_wait_median_ms"] == 10.0
    (f,) = _cpu_stats([0.07] * 3, [23.0] * 3, [None] * 3, overhead=5.0)
    assert f.severity == "advisory" and f.evidence["load_wait_median_ms"] is None


def test_runqueue_wait_reads_this_thread_and_grows_only_while_waiting():
    """/proc/thread-self/schedstat's second field: a thread that sleeps does not wait for a
    CPU; the value is the same read through the pid path for the main thread."""
    import os
    import time

    w0 = guards.runqueue_wait_ms()
    if w0 is None:
        pytest.skip("this kernel keeps no schedstat")
    time.sleep(0.2)
    w1 = guards.runqueue_wait_ms()
    assert 0.0 <= w1 - w0 < 100.0  # 200 ms asleep: at most the wake-up's wait, never the sleep
    assert guards.runqueue_wait_ms(os.getpid()) is not None


def test_process_cpu_time_counts_work_not_sleep():
    """/proc/<pid>/stat utime + stime (+ waited-for children), in 10 ms ticks: 0.3 s of
    spinning adds about 300 ms, 0.3 s of sleep about nothing."""
    import os
    import time

    a = guards.process_cpu_ms(os.getpid())
    time.sleep(0.3)
    b = guards.process_cpu_ms(os.getpid())
    t_end = time.process_time() + 0.3
    while time.process_time() < t_end:
        pass
    c = guards.process_cpu_ms(os.getpid())
    assert 0.0 <= b - a <= 30.0
    assert 250.0 <= c - b <= 400.0


def test_cpu_time_gap_is_a_hack_whatever_the_wall_clock_says():
    """CPU: a frozen clock (0 ms reports) over calls in which the worker used 40 ms of CPU
    each, with the whole wall gap excused as run-queue wait (its own threads kept its main
    thread off the CPU): 40 / n CPUs > 10 x 0 + 10 on 3 of 3 on one or two CPUs: a hack.
    An honest call that used 4 ms of CPU in a 4 ms report is no finding (4 < 50); nor is one
    tick (10 ms) read for a 0.07 ms call on one CPU (10 < 10.7)."""
    from solbench.harness import measure
    from solbench.harness.measure import Block, timing_stats

    for n in (1, 2):
        orig = measure._worker_cpus
        measure._worker_cpus = lambda n=n: n
        try:
            findings = []
            timing_stats([Block(host=[0.0] * 3, roundtrip=[50.0] * 3, wait=[45.0] * 3, cpu=[40.0] * 3)],
                         is_cuda=False, warmup=0, flush_bytes=0, findings=findings, overhead=5.0)
            (f,) = [x for x in findings if x.check == "timing_plausibility"]
            assert f.severity == "hack" and f.evidence["cpu_iterations_flagged"] == 3 and f.evidence["cpus"] == n
            findings = []
            timing_stats([Block(host=[4.0] * 3, roundtrip=[9.0] * 3, wait=[0.0] * 3, cpu=[4.0] * 3)],
                         is_cuda=False, warmup=0, flush_bytes=0, findings=findings, overhead=5.0)
            assert not [x for x in findings if x.check == "timing_plausibility"]
            findings = []
            timing_stats([Block(host=[0.07] * 3, roundtrip=[6.0] * 3, wait=[0.0] * 3, cpu=[10.0] * 3)],
                         is_cuda=False, warmup=0, flush_bytes=0, findings=findings, overhead=5.0)
            assert not [x for x in findings if x.check == "timing_plausibility"]
        finally:
            measure._worker_cpus = orig


def test_cuda_stats_keep_each_calls_kernel_sum_beside_its_span():
    """Issue 31: the trace keeps, per call, the span and the sum of kernel durations (their
    difference is the host's gaps between the call's launches)."""
    from solbench.harness.measure import Block, timing_stats
    from solbench.harness.protocol import TimeEndReply

    end = TimeEndReply.model_validate({"cupti": True, "span_ms": [0.30, 0.32, 0.31], "kernel_sum_ms": [0.02, 0.021, 0.02],
                                       "late_ms": [0.0] * 3, "kernel_sets": [["a", "b"]] * 3})
    tm = timing_stats([Block(host=[0.2] * 3, event=[0.3] * 3, roundtrip=[0.5] * 3, end=end)], is_cuda=True,
                      warmup=5, flush_bytes=0, findings=None, overhead=0.4)
    assert tm.samples_ms == [0.30, 0.32, 0.31] and tm.kernel_sum_samples_ms == [0.02, 0.021, 0.02]
    assert tm.kernel_sum_median_ms == pytest.approx(0.02)


@pytest.mark.parametrize("cupti", [True, False])
def test_cuda_samples_do_not_read_the_noop_baseline(cupti):
    """On CUDA the no-op baseline subtracted on the CPU has no reader: the samples are device
    spans (CUPTI) or CUDA-event windows, and only the candidate's plausibility check reads a
    no-op (its own, ``plausibility_overhead``). So the reference worker's no-op requests are
    made on the CPU only (harness/timed.py ``_reference_noop``): the same blocks give the same
    statistics whatever baseline is passed."""
    from solbench.harness.measure import Block, timing_stats
    from solbench.harness.protocol import TimeEndReply

    end = (TimeEndReply.model_validate({"cupti": True, "span_ms": [0.30, 0.32, 0.31, 0.33],
                                        "kernel_sum_ms": [0.2] * 4, "late_ms": [0.0] * 4,
                                        "kernel_sets": [["a"]] * 4})
           if cupti else TimeEndReply.model_validate({"cupti": False, "reason": "no CUPTI"}))

    def stats(overhead, findings):
        blk = Block(host=[0.2] * 4, event=[0.34, 0.35, 0.36, 0.37], roundtrip=[0.9] * 4, end=end)
        return timing_stats([blk], is_cuda=True, warmup=5, flush_bytes=0, findings=findings,
                            overhead=overhead, plausibility_overhead=0.5 if findings is not None else None)

    # the reference's side (no findings) and the candidate's (its own no-op for plausibility)
    for findings in (None, []):
        a, b = stats(0.0, findings), stats(7.5, findings)
        assert a.samples_ms == b.samples_ms == ([0.30, 0.32, 0.31, 0.33] if cupti else [0.34, 0.35, 0.36, 0.37])
        assert a.model_dump() == b.model_dump()
