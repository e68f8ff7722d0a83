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
                       context: TraceContext | None = None, spares=None) -> list[Trace]:
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
    findings and the SOL step are added to it here. ``spares``: a ``harness.SparePool`` the
    evaluator made here takes its workers from (started by the caller ahead of need).

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
            ev = Evaluator(problem, cfg, spares=spares)
            try:
                ev.evaluate(solution, on_trace=emit, context=ctx)
            finally:
                ev.close()
    finally:
        if step is not None:
            step.stop()
    return out


def make_default_evaluator(config: EvalConfig | None = None) -> "Session":
    """The evaluator a run's executor uses when none is given (a :class:`Session` with the
    run's settings, ``config``; its device and workloads are each pair's)."""
    return Session(config)


class Session:
    """One problem at a time (the default evaluator of a run): one ``harness.Evaluator`` per
    problem, kept while consecutive pairs share that problem, so the eager reference's timing worker is
    started once per problem instead of once per candidate (about 4 s each on the H200).
    The harness drops that worker after a candidate that crashed, hung or cheated. One
    :class:`~solbench.harness.workers.SparePool` serves every problem of the run
    (``spare_workers``): each pair takes its workers already started. The SOL bounds of a
    (problem, workload) are worked out once per run and shared by its candidates.
    ``config``: the run's settings (default: EvalConfig's); each pair's evaluation gets them
    with that pair's device and workloads."""

    #: accepts ``on_trace`` (called as each workload finishes) and ``context``
    streams = True

    def __init__(self, config: EvalConfig | None = None):
        self.config = config if config is not None else EvalConfig()
        self.key = None
        self.ev = None
        self.spares = None  # workers started ahead, shared by the run's problems
        self.sol_cache: dict = {}  # SOL bounds of (problem, workload, hardware): run.sol.sol_block

    def __call__(self, problem: Problem, solution: Solution, device: str,
                 uuids: list[str], on_trace: Callable[[Trace], None] | None = None,
                 context=None) -> list[Trace]:
        from .. import harness
        from ..harness import SparePool

        config = replace(self.config, device=device, workloads=list(uuids))
        key = (id(problem), device)
        n_spares = config.n_spare_workers()
        if self.ev is None or self.key != key:
            self.close_evaluator()
            if n_spares > 0 and (self.spares is None or self.spares.device != device):
                self.close_spares()
                self.spares = SparePool(device, n_spares)
            self.ev = harness.Evaluator(problem, config, spares=self.spares if n_spares > 0 else None)
            self.key = key
        return list(evaluate_and_score(problem, solution, config, evaluator=self.ev,
                                       on_trace=on_trace, sol_cache=self.sol_cache, context=context))

    def start_ahead(self, device: str, sol_work: Iterable[tuple[Problem, list[str]]] = ()) -> None:
        """Before the first pair: start the spare workers (when this device uses them), then,
        while they start in their own processes, work out the SOL bounds of ``sol_work``
        ((problem, workload uuids) pairs) in this thread, so neither waits on the other and
        no timed window is open yet. Raises nothing for a bound that cannot be counted."""
        from ..harness import SparePool
        from .sol import prime_sol_many, resolve_hardware

        n = replace(self.config, device=device).n_spare_workers()
        if n > 0 and self.spares is None:
            self.spares = SparePool(device, n)
        if self.spares is not None:
            self.spares.fill()
        hw = resolve_hardware(device, None)
        prime_sol_many([(problem, list(uuids)) for problem, uuids in sol_work], hw, self.sol_cache)

    def close_evaluator(self) -> None:
        if self.ev is not None:
            self.ev.close()
        self.ev = None
        self.key = None

    def close_spares(self) -> None:
        if self.spares is not None:
            self.spares.close()
        self.spares = None

    def close(self) -> None:
        self.close_evaluator()
        self.close_spares()
