"""The one place that decides a trace's status.

:func:`decide` maps the evidence of one (solution, workload) evaluation to a status; the
evaluator calls it for every trace it makes and the pipeline calls :func:`rejudge` when the
SOL step (``solbench.sol.classify_against_sol``) adds a finding. Nothing else sets or changes a status.

Evidence, in the order it decides:

1. ``failure`` of kind COMPILE_ERROR, INVALID_REFERENCE or NOT_RUNNABLE: nothing of the
   candidate's was judged (it did not build, the problem itself is broken, or it cannot run
   on this device or machine); that status.
2. any finding of severity ``hack`` (:mod:`solbench.harness.checks`): REWARD_HACK, whatever
   else happened (a hack found before a crash or a wrong answer is still a hack).
3. any other ``failure`` observed by the parent (the worker died, hung, replied garbage, the
   outputs had the wrong shape / dtype, a correctness round failed): its status, except that
   a numerical failure (INCORRECT_NUMERICAL) with the finding ``strict_round_failed`` is
   INCORRECT_STRICT: every upstream-compatible round passed (SOL-ExecBench's verdict would
   be PASSED) and the strict round (random values where upstream's are exactly 1 / 0) failed.
4. a finding of severity ``incorrect``: INCORRECT_STRICT for ``strict_round_failed``, else
   INCORRECT_NUMERICAL.
5. otherwise PASSED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..spec.trace import Finding, Status, Trace
from .checks import Severity

#: statuses a failure can carry
FAILURE_STATUSES = frozenset(Status) - {Status.PASSED, Status.REWARD_HACK}


@dataclass(frozen=True)
class Failure:
    """Something the parent observed that ends the evaluation of a workload: the status it
    stands for and a one-line reason (goes to the end of the trace's log)."""

    status: Status
    reason: str

    def __post_init__(self):
        if self.status not in FAILURE_STATUSES:
            raise ValueError(f"{self.status} is not a failure status")


def decide(findings: Iterable[Finding], failure: Failure | None = None) -> Status:
    """The status of one evaluation (rules in the module doc). Pure."""
    findings = list(findings)
    if failure is not None and failure.status in (Status.COMPILE_ERROR, Status.INVALID_REFERENCE,
                                                Status.NOT_RUNNABLE):
        return failure.status
    if any(f.severity == Severity.HACK.value for f in findings):
        return Status.REWARD_HACK
    strict = any(f.check == "strict_round_failed" for f in findings)
    if failure is not None:
        if strict and failure.status == Status.INCORRECT_NUMERICAL:
            return Status.INCORRECT_STRICT
        return failure.status
    if any(f.severity == Severity.INCORRECT.value for f in findings):
        return Status.INCORRECT_STRICT if strict else Status.INCORRECT_NUMERICAL
    return Status.PASSED


def rejudge(trace: Trace, new_findings: list[Finding]) -> Trace:
    """``trace`` with ``new_findings`` added and its status decided again from all of them
    (a PASSED trace keeps its figures only while it stays PASSED). Returns a new Trace."""
    if not new_findings:
        return trace
    ev = trace.evaluation.model_copy(deep=True)
    ev.findings.extend(new_findings)
    prior = None if ev.status in (Status.PASSED, Status.REWARD_HACK) else Failure(ev.status, "")
    if ev.status == Status.REWARD_HACK:  # its deciding finding is still among the findings
        prior = None
    status = decide(ev.findings, prior)
    if status != Status.PASSED:
        ev.performance = None
        if ev.sol is not None:
            ev.sol = ev.sol.model_copy(update={"score": None})
    ev.status = status
    return Trace.model_validate({**trace.model_dump(), "evaluation": ev.model_dump()})
