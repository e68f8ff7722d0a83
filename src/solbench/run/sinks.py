"""Where finished traces go: one :class:`TraceSink` interface for the results store, progress
and any later consumer, instead of ``on_trace`` / ``on_pair_done`` callbacks threaded through
the executors.

An executor hands each pair's traces to a :class:`Delivery` as they are finished (workload by
workload locally, a pair at a time from a Ray worker); the delivery numbers
``executor.seq`` (the trace's 1-based position among the traces the run wrote, the one thing
about a trace not known before the harness ran) and passes the numbered traces to every sink
in order: the store first, so a trace a sink shows is already on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Protocol

from ..spec.trace import Trace


class TraceSink(Protocol):
    """Receives the finished traces of a run. ``pair`` is the plan's pair
    (:class:`solbench.run.plan.PairPlan`) they belong to."""

    def traces(self, pair, traces: list[Trace]) -> None:
        """Finished, numbered traces of ``pair`` (one or several), in the order written."""

    def pair_done(self, pair, traces: list[Trace]) -> None:
        """``pair`` has no work left in this run; ``traces``: all it wrote (maybe none)."""


class StoreSink:
    """Appends traces to a results file as signed strict JSON lines (:mod:`solbench.store`),
    one append + fsync per call."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def traces(self, pair, traces: list[Trace]) -> None:
        from ..store import append_traces

        append_traces(self.path, traces)

    def pair_done(self, pair, traces: list[Trace]) -> None:
        pass


class CallbackSink:
    """The callbacks of the executors' public signature as a sink: ``on_trace(pair, trace)``
    per trace, ``on_pair_done(pair, traces)`` per pair."""

    def __init__(self, on_trace: Callable | None = None, on_pair_done: Callable | None = None):
        self.on_trace, self.on_pair_done = on_trace, on_pair_done

    def traces(self, pair, traces: list[Trace]) -> None:
        if self.on_trace is not None:
            for t in traces:
                self.on_trace(pair, t)

    def pair_done(self, pair, traces: list[Trace]) -> None:
        if self.on_pair_done is not None:
            self.on_pair_done(pair, traces)


def numbered(traces: list[Trace], seq0: int) -> list[Trace]:
    """``traces`` with ``executor.seq`` set to their 1-based position among the traces the
    run wrote (``seq0`` written before them); a trace without an executor stamp keeps none."""
    out = []
    for i, t in enumerate(traces):
        ex = t.evaluation.executor
        if ex is not None:
            ev = t.evaluation.model_copy(update={"executor": ex.model_copy(update={"seq": seq0 + i + 1})})
            t = t.model_copy(update={"evaluation": ev})
        out.append(t)
    return out


class Delivery:
    """Numbers each finished trace and hands it to every sink, in order; ``written`` holds
    every trace delivered so far (numbered)."""

    def __init__(self, sinks: Iterable[TraceSink]):
        self.sinks = list(sinks)
        self.written: list[Trace] = []

    def traces(self, pair, traces: list[Trace]) -> list[Trace]:
        traces = numbered(traces, len(self.written))
        self.written.extend(traces)
        for s in self.sinks:
            s.traces(pair, traces)
        return traces

    def pair_done(self, pair, traces: list[Trace]) -> None:
        for s in self.sinks:
            s.pair_done(pair, traces)


def run_sinks(results_path: Path, on_trace=None, on_pair_done=None,
              sinks: Iterable[TraceSink] = ()) -> Delivery:
    """The delivery of a run: the store at ``results_path``, then ``sinks``, then the
    callbacks."""
    return Delivery([StoreSink(results_path), *sinks, CallbackSink(on_trace, on_pair_done)])
