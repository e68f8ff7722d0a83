"""Red team (CPU resolution rule): ``solbench compare`` judges CPU samples whose time the run
itself recorded as unresolved (``timing.resolved`` false: below 3 x the IQR of the no-op
windows, docs/harness.md "Resolution of CPU times"). The same honest candidate, evaluated
twice on one workload, then reads "slower 28.9x" with p = 0.0073.

Real runs (shared 2-core host, load 8-12), three times the same command:
PYTHONPATH=src python -m solbench.cli eval .../FlashInfer-Bench/024_rmsnorm_h2048
--solution rmsnorm.py -w 1 --device cpu -o cmpN.jsonl (rmsnorm.py: the reference's formula
in one expression), then `solbench compare cmp1.jsonl cmp3.jsonl`. The samples below are
those runs' ``timing.samples_ms`` (ms), both unresolved (resolution 11.9 and 13.6 ms)."""

from pathlib import Path

import pytest

from solbench.report.compare import compare_rows
from solbench.report.records import rows_from_traces
from solbench.spec.trace import Correctness, Environment, Evaluation, Performance, Status, TimingStats, Trace
from solbench.spec.workload import Workload

RUN1 = [0.151, 0.17, 0.273, 0.011, 4.621, 5.643, 0.132, 0.252, 0.217, 4.72]
RUN3 = [0.434, 6.671, 10.262, 2.933, 1.627, 0.222, 6.9, 8.972, 8.301, 9.613]


def _row(samples, resolution):
    med = sorted(samples)[len(samples) // 2]
    ts = TimingStats(method="perf_counter", median_ms=med, iqr_ms=1.0, min_ms=min(samples), mean_ms=med,
                     n_samples=len(samples), warmup=2, cold_l2=True, samples_ms=samples,
                     resolved=False, resolution_ms=resolution)
    w = Workload.model_validate({"uuid": "b8b3dda7", "axes": {}, "inputs": {"x": {"type": "random"}}})
    ev = Evaluation(status=Status.PASSED, correctness=Correctness(), environment=Environment(hardware="cpu"),
                    performance=Performance(latency_ms=med, reference_latency_ms=None, speedup_factor=None),
                    timing=ts, reference_timing=ts)
    t = Trace(definition="024_rmsnorm_h2048", solution="rmsnorm_mine", workload=w, evaluation=ev)
    rows, _ = rows_from_traces([t], Path("results.jsonl"), labels={})
    return rows[0]


def test_unresolved_samples_give_no_faster_or_slower_verdict():
    c = compare_rows(_row(RUN1, 11.9), _row(RUN3, 13.6))
    # the same candidate on the same workload: nothing resolved tells the two apart
    assert c.verdict not in ("faster", "slower"), (c.verdict, c.ratio, c.p_value)


def _row_sides(samples, cand_resolved, ref_resolved):
    """One PASSED row; the candidate's and the reference's resolution set apart."""
    med = sorted(samples)[len(samples) // 2]

    def ts(resolved):
        return TimingStats(method="perf_counter", median_ms=med, iqr_ms=1.0, min_ms=min(samples), mean_ms=med,
                           n_samples=len(samples), warmup=2, cold_l2=True, samples_ms=samples,
                           resolved=resolved, resolution_ms=3.0)
    w = Workload.model_validate({"uuid": "b8b3dda7", "axes": {}, "inputs": {"x": {"type": "random"}}})
    ev = Evaluation(status=Status.PASSED, correctness=Correctness(), environment=Environment(hardware="cpu"),
                    performance=Performance(latency_ms=med), timing=ts(cand_resolved), reference_timing=ts(ref_resolved))
    t = Trace(definition="p", solution="c", workload=w, evaluation=ev)
    rows, _ = rows_from_traces([t], Path("results.jsonl"), labels={})
    return rows[0]


def test_compare_names_the_run_whose_candidate_time_is_unresolved():
    fast = [10.0, 10.1, 10.2, 10.3, 10.4, 10.5]
    slow = [20.0, 20.1, 20.2, 20.3, 20.4, 20.5]
    # unresolved in A only: no ratio, no p, no median of A's noise
    c = compare_rows(_row_sides(fast, False, True), _row_sides(slow, True, True))
    assert (c.verdict, c.statistic, c.ratio, c.p_value, c.median_a_ms) == \
        ("unresolved in A", "resolution", None, None, None)
    assert c.median_b_ms == pytest.approx(20.25)
    c = compare_rows(_row_sides(fast, True, True), _row_sides(slow, False, False))
    assert c.verdict == "unresolved in B"
    assert compare_rows(_row_sides(fast, False, True), _row_sides(slow, False, True)).verdict == "unresolved in A and B"
    # the reference's resolution is no part of compare's judgement of the candidate's samples:
    # all 6 of B above all 6 of A, U = 0, exact ratio of medians 20.25 / 10.25
    c = compare_rows(_row_sides(fast, True, False), _row_sides(slow, True, False))
    assert c.verdict == "slower" and c.ratio == pytest.approx(20.25 / 10.25)
