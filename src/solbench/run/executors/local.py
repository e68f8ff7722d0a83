"""The local executor: every pair in this process, one after another, in plan order."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ...spec.trace import ExecutorStamp, Trace
from .. import session as _session
from ..plan import PairPlan, RunPlan
from ..sinks import run_sinks
from .base import OnPairDone, RunOutcome, load_error_traces, pair_context
from .identity import device_identity

if TYPE_CHECKING:  # pragma: no cover
    from ...harness import EvalConfig


def execute(plan: RunPlan, results_path: Path, device: str,
            evaluator=None,
            on_pair_done: Callable[[PairPlan, list[Trace]], None] | None = None,
            config: "EvalConfig | None" = None,
            on_trace: Callable[[PairPlan, Trace], None] | None = None,
            context=None, sinks=()) -> RunOutcome:
    """Evaluate every pair of ``plan`` with work left, appending traces to ``results_path``.
    The default evaluator appends each trace as soon as its workload finishes (and calls
    ``on_trace(pair, trace)`` after writing it), so a killed run keeps every finished
    workload; a given ``evaluator`` has its traces appended after each pair. Traces go
    through the run's sinks (:func:`solbench.run.sinks.run_sinks`: the store, ``sinks``,
    then the callbacks). Every trace
    carries the candidate's solution hash and label (through the pair's
    :class:`~solbench.run.context.TraceContext`, or set on the traces of an evaluator that
    takes none); ``context``: fields every pair's context gets (an executor stamp). An
    exception from the evaluator itself (not a candidate failure, which the harness turns
    into a trace) is reported in ``harness_errors`` and the pair's remaining workloads are not
    written, so a resumed run retries them. ``config``: the run's settings, for the default
    evaluator (each pair's device and workloads are set per pair)."""
    shared = None
    extra = dict(context or {})
    if evaluator is None:
        shared = _session.make_default_evaluator(config)
        evaluator = shared
        # the SOL bounds of every pair's workloads in one counting child before the first timed
        # window (a child is an interpreter and torch's import: seconds), while the spare
        # workers start; without this each problem's first pair started a child of its own
        work: dict[int, tuple] = {}
        for pair in plan.pairs:
            if pair.todo and pair.candidate.solution is not None:
                uuids = work.setdefault(id(pair.problem), (pair.problem, []))[1]
                uuids.extend(w.uuid for w in pair.todo if w.uuid not in uuids)
        try:
            shared.start_ahead(device, list(work.values()))
        except Exception:  # noqa: BLE001 - each pair starts what it needs itself, as before
            pass
    out = run_sinks(results_path, on_trace, on_pair_done, sinks)
    write = out.traces
    errors: list[str] = []

    for pair in plan.pairs:
        if not pair.todo:
            out.pair_done(pair, [])
            continue
        cand = pair.candidate
        streamed: list[Trace] = []

        def stream(t: Trace, pair=pair, streamed=streamed) -> None:
            streamed.extend(write(pair, [t]))

        if cand.solution is None:
            traces = write(pair, load_error_traces(pair, device, executor=extra.get("executor")))
        else:
            try:
                if isinstance(evaluator, _session.Session) or getattr(evaluator, "streams", False):
                    got = evaluator(pair.problem, cand.solution, device, [w.uuid for w in pair.todo],
                                    on_trace=stream, context=pair_context(pair, **extra))
                else:
                    got = evaluator(pair.problem, cand.solution, device, [w.uuid for w in pair.todo])
                    got = [t.model_copy(update={"evaluation": t.evaluation.model_copy(update={
                        "solution_hash": cand.solution_hash, "label": cand.label})}) for t in got]
            except Exception as e:  # noqa: BLE001 - keep the run going, report the pair
                errors.append(f"{pair.problem.name} / {cand.path.name}: "
                              f"{type(e).__name__}: {e}")
                got = list(streamed)
            # a streaming evaluator hands its traces over in order as it makes them
            traces = streamed + write(pair, got[len(streamed):])
        out.pair_done(pair, traces)
    if shared is not None and hasattr(shared, "close"):
        shared.close()
    return RunOutcome(traces=out.written, harness_errors=errors)


class LocalExecutor:
    """Every pair in this process, in plan order (:func:`runner.execute`); each trace is
    stamped ``executor.name`` "local" through its context."""

    name = "local"

    def __init__(self, evaluator=None):
        self._evaluator = evaluator

    def run(self, plan: RunPlan, results_path: Path, device: str, *,
            config: "EvalConfig | None" = None, on_pair_done: OnPairDone | None = None,
            on_trace=None, sinks=()) -> RunOutcome:
        """``on_trace(pair, trace)`` after each trace is written (workload by workload when
        the evaluator streams, which the default one does)."""
        inner = self._evaluator or _session.make_default_evaluator(config)
        stamp = ExecutorStamp(name="local", worker="local", **device_identity(device), attempt=1, retried=False)
        if not (isinstance(inner, _session.Session) or getattr(inner, "streams", False)):
            # an evaluator that takes no context: its traces are stamped as they come back
            plain = inner

            def inner(problem, solution, dev, uuids):
                return [t.model_copy(update={"evaluation": t.evaluation.model_copy(update={"executor": stamp})})
                        for t in plain(problem, solution, dev, uuids)]
        try:
            return execute(plan, results_path, device, evaluator=inner, on_pair_done=on_pair_done,
                           on_trace=on_trace, context={"executor": stamp}, sinks=sinks)
        finally:
            if self._evaluator is None and hasattr(inner, "close"):
                inner.close()
