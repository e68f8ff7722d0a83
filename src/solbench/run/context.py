"""What is known about a trace before the harness runs, handed to the evaluator.

The evaluator (:class:`solbench.harness.Evaluator`) makes each trace once, finished: its
findings are the harness's evidence plus this context's (the static audit's advisory
findings, the executor's retry note) plus the SOL step's, and its status is decided from all
of them by :func:`solbench.harness.verdict.decide`, once. Nothing changes a trace's status
afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..spec.problem import Problem
from ..spec.solution import Solution
from ..spec.trace import ExecutorStamp, Finding

if TYPE_CHECKING:
    from .sol import SolStep


@dataclass(frozen=True)
class TraceContext:
    """Fixed before the harness runs; the same for every workload of one (problem, solution).

    ``solution_hash``: ``evaluation.solution_hash`` (None: the solution's own
    ``content_hash()``; a suite run gives the hash of the candidate's file as planned);
    ``label``: ``evaluation.label`` (the candidate's label in a suite run); ``executor``: the
    stamp of who evaluates (``seq`` is numbered where the trace is written, by the sink);
    ``findings``: advisory evidence known up front (static audit, executor retry), added to
    every trace; ``sol``: the SOL step (:class:`solbench.run.sol.SolStep`), None without a
    hardware spec (CPU)."""

    solution_hash: str | None = None
    label: str | None = None
    executor: ExecutorStamp | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    sol: "SolStep | None" = None

    def with_(self, **changes) -> "TraceContext":
        """A copy with ``changes``; ``findings`` given here are appended, not replaced."""
        if "findings" in changes:
            changes["findings"] = tuple(self.findings) + tuple(changes["findings"])
        return replace(self, **changes)


def static_audit_findings(problem: Problem, solution: Solution) -> list[Finding]:
    """The static audit's advisory findings (rule, file:line, snippet) for ``solution``; none
    for the reference. Advisory only: runtime evidence decides verdicts."""
    from ..harness import finding

    if solution.author == "reference":
        return []
    try:
        from ..integrity.static_audit import audit_solution

        return list(audit_solution(solution, problem.definition))
    except Exception as e:  # noqa: BLE001 - the audit never blocks an evaluation
        return [finding("audit.failed", f"{type(e).__name__}: {e}")]
