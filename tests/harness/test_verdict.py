"""verdict.decide: the one status decision, on hand-made evidence."""

import pytest

from solbench.harness.checks import finding
from solbench.harness.verdict import Failure, decide, judge
from solbench.run.context import TraceContext
from solbench.spec.trace import Performance, SolBlock, Status
from solbench.spec.workload import Workload

HACK = finding("input_mutation", "wrote to x")
ADV = finding("timing_unstable", "busy")
FAIL = finding("constant_output", "same")


def test_order_of_evidence():
    assert decide([]) == Status.PASSED
    assert decide([ADV]) == Status.PASSED
    assert decide([ADV, HACK]) == Status.REWARD_HACK
    # a hack found before a crash, a timeout or a wrong answer is still a hack
    for st in (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.INCORRECT_NUMERICAL, Status.INCORRECT_SHAPE):
        assert decide([HACK], Failure(st, "x")) == Status.REWARD_HACK
        assert decide([ADV], Failure(st, "x")) == st
    # nothing of the candidate's was judged
    assert decide([HACK], Failure(Status.COMPILE_ERROR, "x")) == Status.COMPILE_ERROR
    assert decide([HACK], Failure(Status.INVALID_REFERENCE, "x")) == Status.INVALID_REFERENCE
    assert decide([FAIL]) == Status.INCORRECT_NUMERICAL
    with pytest.raises(ValueError):
        Failure(Status.PASSED, "no")


class _Step:
    """A SOL step that answers ``block`` and ``found`` and counts its calls."""

    def __init__(self, found):
        self.found, self.calls = found, 0

    def wait(self):
        pass

    def __call__(self, workload, perf, timing):
        self.calls += 1
        return SolBlock(sol_ms=0.5, score=0.5), list(self.found)


W = Workload(uuid="w", axes={}, inputs={})
PERF = Performance(latency_ms=1.0, reference_latency_ms=2.0, speedup_factor=2.0)


def test_sol_step_evidence_joins_the_one_decision():
    audit = finding("audit.monkey_patch", "patches time")
    # a hack finding of the SOL step: REWARD_HACK, no performance, the bound kept without score
    step = _Step([finding("faster_than_sol", "below the floor")])
    found = [ADV]
    status, perf, sol = judge(found, None, W, PERF, None, TraceContext(findings=(audit,), sol=step))
    assert status == Status.REWARD_HACK and perf is None and sol.sol_ms == 0.5 and sol.score is None
    assert [f.check for f in found] == ["timing_unstable", "audit.monkey_patch", "faster_than_sol"]
    # an advisory one: PASSED with its figures and score
    step = _Step([finding("sol_bound_violated", "model defect")])
    status, perf, sol = judge([], None, W, PERF, None, TraceContext(sol=step))
    assert status == Status.PASSED and perf == PERF and sol.score == 0.5
    # evidence that already decides (a guard's hack, a failure) is never judged against the bound
    step = _Step([])
    status, perf, sol = judge([HACK], None, W, PERF, None, TraceContext(sol=step))
    assert status == Status.REWARD_HACK and perf is None and sol is None and step.calls == 0
    status, perf, sol = judge([], Failure(Status.TIMEOUT, "hung"), W, None, None, TraceContext(sol=step))
    assert status == Status.TIMEOUT and sol is None and step.calls == 0
