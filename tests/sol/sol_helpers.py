"""Helpers shared by the SOL counting tests."""

from __future__ import annotations

from solbench.sol.cache import counts_to_json


def same_counts(a, b) -> None:
    """Assert every counted field of two Counts equal (notes and the fake run's error say how
    a count was made, not what it counted)."""
    ja, jb = counts_to_json(a), counts_to_json(b)
    for k in ("notes", "fake_error"):
        ja.pop(k), jb.pop(k)
    assert ja == jb


def judged(trace, context):
    """A fake evaluator's PASSED trace finished as the harness's evaluator finishes each of
    its traces: the context's evidence and the SOL step's joined, the status decided once
    (:func:`solbench.harness.verdict.judge`)."""
    from solbench.harness.verdict import judge
    from solbench.spec.trace import Trace

    ev = trace.evaluation
    findings = list(ev.findings)
    status, perf, sol = judge(findings, None, trace.workload, ev.performance, ev.timing, context)
    body = trace.model_dump()
    body["evaluation"].update(status=status, performance=perf and perf.model_dump(),
                              sol=sol and sol.model_dump(), findings=[f.model_dump() for f in findings])
    return Trace.model_validate(body)
