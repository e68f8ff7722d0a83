"""Executors: where the pairs of a run plan are evaluated, behind one interface
(``run(plan, results_path, device, *, config, on_pair_done, on_trace) -> RunOutcome``).

- ``local`` (:mod:`.local`, the default): every pair in this process, one after another, in
  plan order.
- ``ray`` (:mod:`.ray`): one evaluation worker per device of a Ray cluster.

Both executors go through :func:`solbench.run.plan.plan_run`, so ``--resume`` skips the
(solution hash, workload uuid) pairs already in the results file in the same way, and both
hand the evaluator each pair's :class:`~solbench.run.context.TraceContext` with the stamp
``evaluation.executor`` (:class:`~solbench.spec.trace.ExecutorStamp`; ``seq`` is numbered
where the trace is written, :func:`solbench.run.sinks.numbered`):

    {"name": "local" | "ray", "worker": str, "node": str, "pid": int,
     "gpu_uuid": "GPU-..." | None, "attempt": int, "retried": bool, "seq": int}

``gpu_uuid`` is the NVML UUID of the one GPU the evaluation ran on (None on the CPU);
``seq`` is the trace's 1-based position among the traces this run wrote.

Ordering of the results file. The driver alone writes it, one pair's traces at a time as the
pair finishes (one append + fsync per pair): the file is in completion order, each pair's
traces are contiguous and in the problem's workload order, and ``executor.seq`` numbers them
in that order. With one local worker completion order is plan order (problems by path,
candidates by file name). The order does not depend on scheduling once sorted by
:func:`canonical_key` (definition, solution, solution hash, workload uuid): reports that
compare runs sort by it.

Failures. A pair whose worker (actor process, or its node) dies mid-pair gets no trace from
that attempt; it goes back to the queue, runs on another worker when one is free (on the
restarted worker only when no other is left) and its traces carry ``executor.attempt`` > 1,
``executor.retried`` and the advisory finding ``executor_retried`` naming the lost worker
(both in the context the retried pair is sent with: evidence before the status decision).
After ``max_attempts`` lost workers the pair is reported as a harness error and nothing is
written, so a resumed run evaluates it again: never lost, never written twice. An exception
of the evaluator itself (not a candidate failure, which the harness turns into a trace) is a
harness error as in the local executor, and is not retried.
"""

from __future__ import annotations

from .base import OnPairDone, RunOutcome, canonical_key, load_error_traces, pair_context
from .identity import _torch_uuid, device_identity, nvml_uuid, visible_devices  # noqa: F401
from .local import LocalExecutor, execute
from .ray import EvalWorker, RayExecutor

EXECUTORS = ("local", "ray")

__all__ = ["EXECUTORS", "EvalWorker", "LocalExecutor", "OnPairDone", "RayExecutor", "RunOutcome",
           "canonical_key", "device_identity", "execute", "load_error_traces", "make_executor",
           "nvml_uuid", "pair_context", "visible_devices"]


def make_executor(name: str, *, address: str | None = None, workers: int | None = None,
                  on_dispatch=None):
    """The executor called ``name`` (``local`` or ``ray``). Raises ValueError otherwise."""
    if name == "local":
        if address is not None or workers is not None:
            raise ValueError("--address and --workers need --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address=address, workers=workers, on_dispatch=on_dispatch)
    raise ValueError(f"executor {name!r}: expected one of {', '.join(EXECUTORS)}")
