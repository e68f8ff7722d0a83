"""The speedup bound of a CPU pair with exactly one side unresolved (issue 13, docs/harness.md
"Resolution of CPU times"): an unresolved side's median is at most its resolution, so the
resolved side bounds the ratio. Every figure below is worked out by hand in its comment."""

from pathlib import Path

import pytest
from rich.console import Console

from solbench.profile.amdahl import _trace_speedup as amdahl_speedup
from solbench.report.records import rows_from_traces
from solbench.report.summary import counted_bound, summarize, trace_speedup, trace_speedup_bound
from solbench.report.tables import UNRESOLVED_LEGEND, speedup_text, trace_table, unresolved_side
from solbench.spec.trace import (Correctness, Environment, Evaluation, Performance, Status, TimingStats, Trace,
                                 speedup_bound)
from solbench.spec.workload import Workload


def _ts(median, resolved, resolution):
    return TimingStats(method="perf_counter", median_ms=median, iqr_ms=0.1, min_ms=median, mean_ms=median,
                       n_samples=10, warmup=2, cold_l2=True, samples_ms=[median] * 10,
                       resolved=resolved, resolution_ms=resolution)


def _trace(cand, ref, uuid="w", definition="p", bound=None):
    w = Workload.model_validate({"uuid": uuid, "axes": {}, "inputs": {"x": {"type": "random"}}})
    both = cand.resolved is not False and ref.resolved is not False
    perf = Performance(latency_ms=cand.median_ms,
                       reference_latency_ms=ref.median_ms if ref.resolved is not False else None,
                       speedup_factor=ref.median_ms / cand.median_ms if both else None)
    ev = Evaluation(status=Status.PASSED, correctness=Correctness(), environment=Environment(hardware="cpu"),
                    performance=perf, timing=cand, reference_timing=ref, speedup_bound=bound)
    return Trace(definition=definition, solution="cand", workload=w, evaluation=ev)


def test_the_bound_by_hand():
    # candidate 230.2 ms resolved, reference below 40.3 ms: speedup <= 40.3 / 230.2 = 0.17507
    k, v = speedup_bound(_ts(230.2, True, 40.3), _ts(0.001, False, 40.3))
    assert k == "<=" and v == pytest.approx(0.17507, abs=1e-5)
    # reference 8.0 ms resolved, candidate below 2.5 ms: speedup >= 8.0 / 2.5 = 3.2
    assert speedup_bound(_ts(0.3, False, 2.5), _ts(8.0, True, 2.5)) == (">=", pytest.approx(3.2))
    # both unresolved, both resolved, or a side not judged (CUDA: resolved None): no bound
    assert speedup_bound(_ts(0.3, False, 2.5), _ts(0.4, False, 2.5)) is None
    assert speedup_bound(_ts(3.0, True, 2.5), _ts(4.0, True, 2.5)) is None
    assert speedup_bound(_ts(0.3, False, 2.5), _ts(8.0, None, None)) is None
    assert speedup_bound(_ts(3.0, True, 2.5), _ts(0.4, False, None)) is None  # threshold unknown


def test_summaries_count_only_bounds_that_prove_faster_or_slower():
    slow = _trace(_ts(50.0, True, 10.0), _ts(0.2, False, 10.0))        # <= 10/50 = 0.2: counted 0.2
    fast = _trace(_ts(0.3, False, 2.5), _ts(8.0, True, 2.5))            # >= 8/2.5 = 3.2: counted 3.2
    vague_up = _trace(_ts(5.0, True, 10.0), _ts(0.2, False, 10.0))      # <= 10/5 = 2: neither
    vague_lo = _trace(_ts(0.3, False, 2.5), _ts(1.25, True, 2.5))       # >= 1.25/2.5 = 0.5: neither
    both = _trace(_ts(0.3, False, 2.5), _ts(0.4, False, 2.5))
    assert trace_speedup(slow) == pytest.approx(0.2) and trace_speedup(fast) == pytest.approx(3.2)
    assert trace_speedup_bound(vague_up) == ("<=", pytest.approx(2.0)) and trace_speedup(vague_up) is None
    assert trace_speedup_bound(vague_lo) == (">=", pytest.approx(0.5)) and trace_speedup(vague_lo) is None
    assert trace_speedup_bound(both) is None and trace_speedup(both) is None
    assert counted_bound(("<=", 1.0)) is None and counted_bound((">=", 1.0)) is None
    # the recorded field wins over the timings (a trace written by the evaluator)
    rec = _trace(_ts(50.0, True, 10.0), _ts(0.2, False, 10.0), bound={"op": "<=", "value": 0.19})
    assert trace_speedup(rec) == pytest.approx(0.19)
    # one problem: the bounded slow workload and an exact 5/4 = 1.25: geomean sqrt(0.2 x 1.25) = 0.5
    exact = _trace(_ts(4.0, True, 1.0), _ts(5.0, True, 1.0), uuid="w2")
    s = summarize([slow, exact])["cand"]
    assert s.geomean_speedup == pytest.approx(0.5) and s.win_rate == 0.0
    # per workload: median of (0.2, 1.25, 3.2) = 1.25; wins (> 1): 2 of 3
    s = summarize([slow, _trace(_ts(4.0, True, 1.0), _ts(5.0, True, 1.0), uuid="w2", definition="q"),
                   _trace(_ts(0.3, False, 2.5), _ts(8.0, True, 2.5), uuid="w3", definition="r")],
                  unit="workload")["cand"]
    assert s.median_speedup == pytest.approx(1.25) and s.win_rate == pytest.approx(2 / 3)
    # solbench project's reader (dicts of the JSON line) counts the same
    assert amdahl_speedup(slow.evaluation.model_dump(mode="json")) == pytest.approx(0.2)
    assert amdahl_speedup(vague_up.evaluation.model_dump(mode="json")) is None
    assert amdahl_speedup(rec.evaluation.model_dump(mode="json")) == pytest.approx(0.19)


def test_reports_name_the_unresolved_side_and_print_the_bound():
    slow = _trace(_ts(50.0, True, 10.0), _ts(0.2, False, 10.0))
    fast = _trace(_ts(0.3, False, 2.5), _ts(8.0, True, 2.5))
    both = _trace(_ts(0.3, False, 2.5), _ts(0.4, False, 2.5))
    assert [unresolved_side(t) for t in (slow, fast, both)] == ["reference", "candidate", "both"]
    assert speedup_text(slow, short=True) == "<=0.2x (ref. unres.)"
    assert speedup_text(fast, short=True) == ">=3.2x (cand. unres.)"
    assert speedup_text(both, short=True) == "unres. (both)"
    assert speedup_text(slow) == "<=0.2x (reference unresolved: not above this run's noise floor, 10 ms)"
    assert speedup_text(both) == "unresolved (both sides not above this run's noise floor: 2.5 ms)"
    con = Console(width=250, record=True)
    con.print(trace_table([slow, fast]))
    out = con.export_text()
    assert "unres. <=10 ms" in out and "unres. <=2.5 ms" in out and "<=0.2x (ref. unres.)" in out
    assert UNRESOLVED_LEGEND[:40] in out
    for long in ("unresolved (not above this run", "unresolved: not above this run", "unresolved (both sides"):
        assert long not in out  # the long form stays out of the cells
    rows, _ = rows_from_traces([slow, fast], Path("results.jsonl"), labels={})
    assert rows[0].speedup_bound == "<=0.2x" and rows[0].speedup == pytest.approx(0.2)
    assert rows[0].unresolved_side == "reference" and rows[0].unres_reference == "unres. <=10 ms"
    assert rows[0].latency_ms == 50.0 and rows[0].unres_latency is None
    assert rows[1].speedup_bound == ">=3.2x" and rows[1].latency_ms is None and rows[1].unres_latency == "unres. <=2.5 ms"


def test_the_html_report_prints_the_short_form_and_its_legend():
    from html import escape

    from solbench.report.html import _problem_page

    slow = _trace(_ts(50.0, True, 10.0), _ts(0.2, False, 10.0))
    fast = _trace(_ts(0.3, False, 2.5), _ts(8.0, True, 2.5), uuid="w2")
    rows, _ = rows_from_traces([slow, fast], Path("results.jsonl"), labels={})
    page = _problem_page("p", rows, {})
    for cell in ("unres. <=10 ms", "<=0.2x", "unres. <=2.5 ms", ">=3.2x", UNRESOLVED_LEGEND):
        assert escape(cell) in page, cell
    for long in ("unresolved (not above this run", "unresolved: not above this run", "unresolved (both sides"):
        assert long not in page  # the long form stays out of the cells
