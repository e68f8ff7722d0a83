"""Summary maths on hand-made traces, with hand-worked numbers."""

import math

import pytest

from solbench.report.summary import fast_p, geomean, summarize, summarize_units, trace_speedup, unit_results
from solbench.spec import Trace
from solbench.spec.trace import Correctness, Environment, Evaluation, Performance, Status
from solbench.spec.workload import Workload


def tr(defn, sol, uuid, status="PASSED", speedup=None, ref=None, lat=None, sol_score=None):
    perf = None
    if status == "PASSED":
        perf = Performance(latency_ms=lat if lat is not None else 1.0, reference_latency_ms=ref,
                           speedup_factor=speedup)
    corr = Correctness() if status in ("PASSED", "INCORRECT_NUMERICAL") else None
    ev = Evaluation(status=Status(status), correctness=corr, performance=perf,
                    environment=Environment(hardware="test"),
                    sol={"score": sol_score} if sol_score is not None else None)
    w = Workload(uuid=uuid, axes={}, inputs={})
    return Trace(definition=defn, solution=sol, workload=w, evaluation=ev)


def test_geomean_and_fast_p_by_hand():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    assert geomean([]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    correct = [True, True, False, True]
    speed = [0.8, 1.6, None, 2.5]
    assert fast_p(correct, speed, 0) == 0.75
    assert fast_p(correct, speed, 1) == 0.5
    assert fast_p(correct, speed, 1.5) == 0.5
    assert fast_p(correct, speed, 2) == 0.25
    # strictly greater: a speedup of exactly p does not count
    assert fast_p([True], [2.0], 2) == 0.0


def test_speedup_from_latencies_when_factor_missing():
    t = tr("p", "s", "u", speedup=None, ref=3.0, lat=1.5)
    assert trace_speedup(t) == pytest.approx(2.0)
    assert trace_speedup(tr("p", "s", "u", status="RUNTIME_ERROR")) is None


def test_problem_unit_summary_by_hand():
    traces = [
        # p1: both workloads pass, speedups 2 and 8 -> geomean 4
        tr("p1", "c", "a", speedup=2.0, sol_score=0.6),
        tr("p1", "c", "b", speedup=8.0, sol_score=0.8),
        # p2: one workload fails -> incorrect, speedup ignored
        tr("p2", "c", "a", speedup=3.0),
        tr("p2", "c", "b", status="INCORRECT_NUMERICAL"),
        # p3: passes, slower than eager (0.5)
        tr("p3", "c", "a", speedup=0.5, sol_score=0.25),
        # p4: passes, 1.2x
        tr("p4", "c", "a", speedup=1.2),
    ]
    s = summarize(traces)["c"]
    assert s.units == 4 and s.correct == 3
    assert s.correct_rate == pytest.approx(0.75)
    # correct speedups: 4, 0.5, 1.2 ; wins (>1): 4 and 1.2 -> 2/4
    assert s.win_rate == pytest.approx(0.5)
    assert s.median_speedup == pytest.approx(1.2)
    assert s.geomean_speedup == pytest.approx((4 * 0.5 * 1.2) ** (1 / 3))
    assert s.fast_p == {"0": 0.75, "1": 0.5, "1.5": 0.25, "2": 0.25}
    # SOL: p1 mean(0.6, 0.8) = 0.7, p3 0.25 -> mean 0.475 over 2 units
    assert s.mean_sol_score == pytest.approx(0.475)
    assert s.sol_units == 2
    assert s.statuses == {"PASSED": 5, "INCORRECT_NUMERICAL": 1}


def test_workload_unit_and_labels():
    traces = [tr("p1", "x", "a", speedup=2.0), tr("p1", "x", "b", status="TIMEOUT"),
              tr("p1", "y", "a", speedup=0.5), tr("p2", "y", "a", speedup=4.0)]
    s = summarize(traces, unit="workload")
    assert set(s) == {"x", "y", "all"}
    assert s["x"].units == 2 and s["x"].correct_rate == 0.5 and s["x"].win_rate == 0.5
    assert s["y"].geomean_speedup == pytest.approx(math.sqrt(0.5 * 4.0))
    assert s["all"].units == 4 and s["all"].fast_p["1.5"] == pytest.approx(0.5)
    # custom label function groups x and y together
    s2 = summarize(traces, unit="problem", label_of=lambda t: "one")
    assert list(s2) == ["one"] and s2["one"].units == 3  # (p1,x) (p1,y) (p2,y)
    rows = unit_results(traces)
    assert {(r.definition, r.solution, r.correct) for r in rows} == {
        ("p1", "x", False), ("p1", "y", True), ("p2", "y", True)}


def test_sol_score_above_one_capped_and_counted():
    traces = [tr("p1", "c", "a", speedup=2.0, sol_score=1.4), tr("p2", "c", "a", speedup=2.0,
                                                                 sol_score=0.6)]
    s = summarize(traces)["c"]
    assert s.mean_sol_score == pytest.approx(0.8) and s.sol_above_one == 1


def test_a_partly_scored_problem_has_no_sol_score_and_says_why():
    """As in `solbench report` (report.aggregate): a correct problem of which one workload has
    no SOL score gets none (not the mean of the scored ones, 0.6 here), the why column says how
    many lack one and why, and the candidate's mean is over the fully scored problems only."""
    traces = [tr("p1", "c", "a", speedup=2.0, sol_score=0.6), tr("p1", "c", "b", speedup=2.0),
              tr("p2", "c", "a", speedup=2.0, sol_score=0.9)]
    units = {u.definition: u for u in unit_results(traces)}
    assert units["p1"].correct and units["p1"].sol_score is None
    assert units["p1"].no_sol_score.startswith("no SOL score for 1 of 2 workloads: "), units["p1"].no_sol_score
    assert units["p1"].reason == ""  # the failure reason: none, it is correct
    assert units["p2"].sol_score == pytest.approx(0.9) and units["p2"].no_sol_score == ""
    s = summarize_units(list(units.values()))
    assert s.mean_sol_score == pytest.approx(0.9) and s.sol_units == 1
