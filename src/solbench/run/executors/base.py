"""The parts every executor shares: the pair's context, the traces of a candidate that did
not load, the outcome of a run, the order-independent key of a trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...spec.trace import Environment, Evaluation, Status, Trace
from ..plan import PairPlan

#: on_pair_done(pair, traces): a pair has no work left in the run
OnPairDone = Callable[[PairPlan, list[Trace]], None]


def canonical_key(trace: Trace) -> tuple[str, str, str, str]:
    """Scheduling-independent sort key of a trace: (definition, solution, solution hash,
    workload uuid). Two runs of one plan sorted by it line up trace for trace."""
    return (trace.definition, trace.solution, trace.evaluation.solution_hash or "",
            trace.workload.uuid)


def load_error_traces(pair: PairPlan, device: str, executor=None) -> list[Trace]:
    """COMPILE_ERROR traces for a candidate file that did not even load (bad JSON, missing
    entry point...), one per workload, so the summary counts it as incorrect. ``executor``:
    the :class:`~solbench.spec.trace.ExecutorStamp` of who recorded them."""
    cand = pair.candidate
    name = f"{pair.problem.name}__{cand.label}"
    out = []
    for w in pair.todo:
        ev = Evaluation(status=Status.COMPILE_ERROR,
                        log=f"solution {cand.path} failed to load: {cand.load_error}"[:4000],
                        environment=Environment(hardware=device), solution_hash=cand.solution_hash,
                        label=cand.label, suite=pair.problem.suite, executor=executor, device=device)
        out.append(Trace(definition=pair.problem.name, solution=name, workload=w, evaluation=ev))
    return out


@dataclass
class RunOutcome:
    traces: list[Trace]  # written in this run
    harness_errors: list[str]  # pairs the evaluator itself failed on (not written)


def pair_context(pair: PairPlan, **changes):
    """The :class:`~solbench.run.context.TraceContext` of a pair: its candidate's solution
    hash (of the file as planned, the resume key) and label, and ``changes``."""
    from ..context import TraceContext

    return TraceContext(solution_hash=pair.candidate.solution_hash, label=pair.candidate.label, **changes)
