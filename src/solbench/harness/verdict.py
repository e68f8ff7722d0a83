"""The one place that decides a trace's status.

:func:`decide` maps the evidence of one (solution, workload) evaluation to a status;
:func:`judge`, which the evaluator calls once for every trace it makes, gathers the evidence
first: the harness's, the context's (static audit, executor: ``solbench.run.context``) and,
for a time the evidence before it passes, the SOL step's (``solbench.sol.classify_against_sol``).
Nothing else sets or changes a status.

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

import time
from dataclasses import dataclass
from typing import Iterable

from ..spec.trace import Finding, Performance, SolBlock, Status, TimingStats
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


def judge(findings: list[Finding], failure: Failure | None, workload, perf: Performance | None,
          timing: TimingStats | None = None, context=None,
          phases: dict[str, float] | None = None) -> tuple[Status, Performance | None, SolBlock | None]:
    """The status of one trace, decided once with every piece of evidence in, and the
    figures that go with it: ``(status, performance, sol block)``.

    ``findings`` (the harness's) is extended in place with the ``context``'s (a
    :class:`solbench.run.context.TraceContext`: static audit, executor) and then, for a
    time (``perf``, the candidate's figures, None without a timing) that the evidence so far
    passes, the SOL step's (``context.sol``, :class:`solbench.run.sol.SolStep`: a time below
    the certain floor is ``faster_than_sol``, a hack). A trace that is not PASSED carries no
    performance, and its SOL block (kept for the record) no score. ``phases``: gets ``sol``,
    the SOL step's wall seconds."""
    if context is not None:
        findings.extend(f.model_copy() for f in context.findings)
    sol = None
    step = getattr(context, "sol", None)
    if perf is not None and step is not None and decide(findings, failure) == Status.PASSED:
        step.wait()
        t0 = time.perf_counter()
        sol, more = step(workload, perf, timing)
        findings.extend(more)
        if phases is not None:
            phases["sol"] = round(time.perf_counter() - t0, 3)
    status = decide(findings, failure)
    if status != Status.PASSED:
        perf = None
        if sol is not None:  # the bound stays on record; no score for a failed trace
            sol = sol.model_copy(update={"score": None})
    return status, perf, sol
