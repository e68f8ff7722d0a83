"""One problem at a time: the evaluation of a (problem, solution) pair, finished traces out.

:func:`evaluate_and_score` is what ``solbench eval``, ``generate`` and the suite runner call:
it fixes the :class:`~solbench.run.context.TraceContext` (static audit, the SOL step with its
bounds counted alongside), runs the harness's evaluator once and hands each finished trace to
``on_trace`` as its workload ends. :class:`Session` keeps one harness evaluator per problem
across candidates (the eager reference's timing worker is started once per problem), spare
workers shared by the run and the SOL bounds counted once per run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable

from ..harness import EvalConfig
from ..spec.problem import Problem
from ..spec.solution import Solution
from ..spec.trace import Trace
from .context import TraceContext, static_audit_findings
from . import sol as _sol


def evaluate_and_score(problem: Problem, solution: Solution, config: EvalConfig | None = None,
                       hardware: str | None = None, sol_model: str = "refined",
                       evaluator=None, on_trace: Callable[[Trace], None] | None = None,
                       sol_cache: dict | None = None,
                       on_stage: Callable[[str], None] | None = None,
                       context: TraceContext | None = None) -> list[Trace]:
    """Evaluate ``solution`` on ``problem``: one finished trace per selected workload, its
    SOL block attached when PASSED and the GPU's hardware spec is known.

    ``evaluator``: a ``harness.Evaluator`` of ``problem`` to reuse (its reference-timing
    worker then serves several candidates in turn; ``config`` replaces its settings).
    ``on_trace``: called with each finished trace as soon as its workload is done, before the
    next one starts: to store it and show progress. ``sol_cache``: SOL bounds shared with
    other calls of the run (:func:`solbench.run.sol.sol_block`); None: this call's own.
    ``on_stage``: called with a line saying what is done before the first workload (counting
    the SOL bounds, seconds to minutes) and how long it took. ``context``: what the caller
    knows up front (solution hash, label, executor stamp, findings); the static audit's
    findings and the SOL step are added to it here.

    The bounds are counted on a thread alongside the evaluation (or read from the counts
    cache); only a trace the evidence passes waits for its own, to be judged
    (:class:`solbench.run.sol.SolStep`). Raises what ``harness.Evaluator.evaluate`` raises
    (a bad workload selection), never for candidate behaviour.
    """
    from ..harness import Evaluator

    cfg = config or EvalConfig()
    ctx = context or TraceContext()
    ctx = replace(ctx, findings=tuple(static_audit_findings(problem, solution)) + tuple(ctx.findings))
    hw = _sol.resolve_hardware(cfg.device, hardware)
    cache: dict = sol_cache if sol_cache is not None else {}
    step = None
    if hw is not None:
        step = _sol.SolStep(problem, hw, sol_model, cache,
                            _sol.count_alongside(problem, cfg, hw, cache, on_stage))
        ctx = replace(ctx, sol=step)
    out: list[Trace] = []

    def emit(t: Trace) -> None:
        out.append(t)
        if on_trace is not None:
            on_trace(t)

    try:
        if evaluator is not None:
            if evaluator.problem is not problem:
                raise ValueError("evaluator was made for another problem")
            evaluator.cfg = cfg
            evaluator.evaluate(solution, on_trace=emit, context=ctx)
        else:
            ev = Evaluator(problem, cfg)
            try:
                ev.evaluate(solution, on_trace=emit, context=ctx)
            finally:
                ev.close()
    finally:
        if step is not None:
            step.stop()
    return out
