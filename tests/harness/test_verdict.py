"""verdict.decide: the one status decision, on hand-made evidence."""

import pytest

from solbench.harness.checks import finding
from solbench.harness.verdict import Failure, decide, rejudge
from solbench.spec.trace import Correctness, Environment, Evaluation, Performance, Status, Trace
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


def _passed(latency=1.0, ref=2.0) -> Trace:
    return Trace(definition="d", solution="s", workload=Workload(uuid="w", axes={}, inputs={}),
                 evaluation=Evaluation(status=Status.PASSED, correctness=Correctness(),
                                       performance=Performance(latency_ms=latency, reference_latency_ms=ref,
                                                               speedup_factor=ref / latency),
                                       environment=Environment(hardware="h"), sol={"score": 0.5}))


def test_sol_step_goes_through_the_verdict():
    # a hack finding added after the evaluation: REWARD_HACK, no performance, no score
    t = rejudge(_passed(), [finding("faster_than_sol", "below the floor")])
    assert t.evaluation.status == Status.REWARD_HACK and t.evaluation.performance is None
    assert t.evaluation.sol.score is None
    # an advisory one: the trace stays PASSED with its figures
    t = rejudge(_passed(ref=1.2), [finding("sol_bound_violated", "model defect")])
    assert t.evaluation.status == Status.PASSED and t.evaluation.performance.latency_ms == 1.0
