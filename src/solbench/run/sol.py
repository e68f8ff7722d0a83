"""The SOL step of a run: the bounds of its workloads and the SOL block of a measured time.

The bounds of a (problem, workload, hardware) do not depend on the candidate: they are
counted once per run, in a child process (:mod:`solbench.sol.isolated`: a reference that
crashes the count costs its block, not the run), alongside the evaluation
(:class:`_CountAlongside`) or ahead of it (:func:`prime_sol_many`), and kept in a cache the
run's candidates share. :class:`SolStep` is what the evaluator is handed (through
:class:`solbench.run.context.TraceContext`): for a trace the evidence passes, its SOL block
and the finding of its time against the bound, evidence the one status decision reads
(:func:`solbench.harness.verdict.decide`). ``harness`` and ``sol`` never import each other;
this layer joins them.
"""

from __future__ import annotations

import threading
import time

from typing import Any, Callable

from .. import limits
from ..harness import EvalConfig
from ..harness import finding
from ..spec.problem import Problem
from ..spec.trace import Finding, Performance, SolBlock, TimingStats, Trace
from ..spec.workload import Workload
from .sol_cache import counts_cache


def resolve_hardware(device: str, hardware: str | None) -> str | None:
    """The hardware spec to use: ``hardware`` if given ("none" disables SOL), else the bundled
    spec matching the CUDA device's name, else None (CPU: no SOL)."""
    if hardware is not None:
        return None if hardware.lower() == "none" else hardware
    import torch

    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return None
    from ..sol import hardware_for_device_name

    return hardware_for_device_name(torch.cuda.get_device_name(torch.device(device)))


def sol_block(problem: Problem, trace: Trace, hardware: str, model: str = "refined",
              cache: dict | None = None) -> SolBlock:
    """:func:`sol_block_of` for a trace's workload, performance and timing."""
    return sol_block_of(problem, trace.workload, trace.evaluation.performance,
                        trace.evaluation.timing, hardware, model, cache)


def sol_block_of(problem: Problem, workload, perf, timing, hardware: str, model: str = "refined",
                 cache: dict | None = None) -> SolBlock:
    """SOL figures for one trace: both bounds (refined and solar, from one count) with
    ``t_sol_model`` naming the one that is T_SOL (``sol_ms``), the certain floor
    (``t_certain_ms``), T_measured / T_SOL (``measured_over_sol``), and score and headroom h
    against the eager reference measured in the same run. Raises nothing: a counting failure
    is recorded as the block's ``error``.

    ``cache``: bounds already worked out, keyed by the problem (its path and name), the
    workload (its whole spec, not only its uuid) and the hardware; the bounds depend on these
    alone, not on the candidate, so one cache serves every candidate of a run
    (:func:`prime_sol` fills it ahead)."""
    from ..sol import sol_score

    try:
        both = _bounds(problem, workload, hardware, cache)
        b = both[model]
    except Exception as e:  # noqa: BLE001 - the SOL block is best effort, never fatal
        return SolBlock(hardware=hardware, model=model, error=f"{type(e).__name__}: {e}")
    block: dict[str, Any] = {
        "hardware": b.hardware, "model": model, "t_sol_model": model, "sol_ms": b.sol_ms,
        "t_certain_ms": both["refined"].t_certain_ms,
        "bounds": {m: {"sol_ms": x.sol_ms, "hardware": x.hardware, "bottleneck": x.bottleneck,
                       "terms_ms": x.terms_ms} for m, x in both.items()},
        "bound": b.model_dump(mode="json"), "baseline": "eager"}
    if perf is not None and timing is not None and timing.resolved is False:
        # a time below the CPU path's resolution is noise: no ratio to the bound, no score
        block["unresolved"] = True
        block["score"] = None
        return SolBlock.model_validate(block)
    if perf is not None and perf.latency_ms and b.sol_ms:
        block["measured_over_sol"] = perf.latency_ms / b.sol_ms
        block["measured_over_sol_by_model"] = {m: perf.latency_ms / x.sol_ms
                                               for m, x in both.items() if x.sol_ms}
    if perf is not None and perf.reference_latency_ms:
        s = sol_score(perf.latency_ms, perf.reference_latency_ms, b.sol_ms, baseline="eager")
        # the score's t_sol_ms is the block's sol_ms: one T_SOL per block
        block.update(s.model_dump(mode="json", exclude={"t_sol_ms"}))
    return SolBlock.model_validate(block)


def time_resolved(trace: Trace) -> bool:
    """False when the candidate's time (``evaluation.timing.resolved``) is below what the CPU
    timing path resolves; True otherwise (resolved, or not judged: CUDA, older traces)."""
    ts = trace.evaluation.timing
    return ts is None or ts.resolved is not False


def _key(problem: Problem, workload, hardware: str) -> tuple:
    return (str(problem.path), problem.name, workload.model_dump_json(), hardware)


def _bounds(problem: Problem, workload, hardware: str, cache: dict | None) -> dict:
    """{"refined": Bound, "solar": Bound} of ``workload`` (one count for both), from ``cache``
    when there, else counted in a child process (:mod:`solbench.sol.isolated`: a reference
    that crashes the count costs this block, not the run). Raises what counting raises
    (:class:`~solbench.sol.isolated.CountFailed`, kept in ``cache`` too)."""
    key = _key(problem, workload, hardware)
    if cache is not None and key in cache:
        got = cache[key]
    else:
        got = _count([(problem, [workload])], hardware)[0][workload.uuid]
        if cache is not None:
            cache[key] = got
    if isinstance(got, Exception):
        raise got
    return got


def _count(items: list, hardware: str, child=None) -> list[dict]:
    """Per ``(problem, workloads)`` of ``items``: uuid -> both bounds, or the exception that
    stands for them. Read from the default counts cache (:func:`counts_cache`) where it holds
    them, the rest in one child process (:func:`solbench.sol.isolated.bounds_isolated_many`;
    ``child``: the :class:`~solbench.sol.isolated.CountingChild` to use) unless
    ``SOLBENCH_SOL_IN_PROCESS=1`` (debugging: a crash of the count is then the run's)."""
    from ..sol.isolated import bounds_isolated_many, counting_in_process

    if counting_in_process():
        from ..sol import bound, count_workload

        res: list[dict] = []
        for problem, workloads in items:
            got: dict = {}
            for w in workloads:
                try:
                    c = count_workload(problem, w)
                    got[w.uuid] = {m: bound(problem, w, hardware=hardware, model=m, counts=c)
                                   for m in ("refined", "solar")}
                except Exception as e:  # noqa: BLE001 - recorded as the block's error
                    got[w.uuid] = e
            res.append(got)
        return res
    return bounds_isolated_many(items, hardware, cache=counts_cache(), child=child)


def prime_sol(problem: Problem, uuids: list[str], hardware: str | None, cache: dict) -> None:
    """Work out the SOL bounds of ``problem``'s workloads ``uuids`` on ``hardware`` into
    ``cache`` (see :func:`sol_block`) now, e.g. before timing starts (:func:`prime_sol_many`
    for one problem). Raises nothing."""
    prime_sol_many([(problem, uuids)], hardware, cache)


def prime_sol_many(work, hardware: str | None, cache: dict, child=None) -> None:
    """:func:`prime_sol` for each ``(problem, uuids)`` of ``work``, in one counting child for
    all of them (:mod:`solbench.sol.isolated`: an interpreter and torch's import, seconds,
    once; ``child``: a :class:`~solbench.sol.isolated.CountingChild` of the caller's). No-op when
    ``hardware`` is None; a workload whose count fails is cached with its error (its trace's
    SOL block records it). Raises nothing."""
    if hardware is None:
        return
    items = []
    for problem, uuids in work:
        by_uuid = {w.uuid: w for w in problem.workloads}
        todo = [by_uuid[u] for u in dict.fromkeys(uuids) if u in by_uuid
                and _key(problem, by_uuid[u], hardware) not in cache]
        if todo:
            items.append((problem, todo))
    if not items:
        return
    try:
        got = _count(items, hardware, child)
    except Exception:  # noqa: BLE001 - best effort, as in sol_block
        return
    for (problem, todo), res in zip(items, got):
        for w in todo:
            if w.uuid in res:
                cache[_key(problem, w, hardware)] = res[w.uuid]


class _CountAlongside:
    """The SOL bounds of an evaluation's workloads, counted on a thread of this process (in a
    counting child, or read from the counts cache) while the evaluation starts its workers
    and makes its inputs: a count is never on the critical path before the first workload.
    :meth:`wait` joins it (a PASSED trace's SOL block needs its bound); :meth:`stop` kills a
    count still running when the evaluation ends early."""

    def __init__(self, problem: Problem, uuids: list[str], hw: str, cache: dict, todo: int,
                 on_stage: Callable[[str], None] | None):
        from ..sol.isolated import CountingChild, counting_in_process

        from ..proc.registry import OWN

        c = counts_cache()
        # registered with the harness: it runs while candidates do, and is no stray of theirs
        self.child = None if counting_in_process() else CountingChild(
            hw, cache=None if c is None else str(c.root), cache_key=None if c is None else c.key,
            registry=OWN)
        self.todo, self.on_stage = todo, on_stage
        self.took_s: float | None = None
        self._said = False

        def run() -> None:
            t0 = time.perf_counter()
            try:
                prime_sol_many([(problem, uuids)], hw, cache, child=self.child)
            finally:
                self.took_s = time.perf_counter() - t0

        self.thread = threading.Thread(target=run, name="solbench-sol-count", daemon=True)
        self.thread.start()

    def wait(self) -> None:
        if self.thread.is_alive():
            t0 = time.perf_counter()
            self.thread.join()
            if self.on_stage is not None and self.todo:
                self.on_stage(f"SOL: waited {time.perf_counter() - t0:.1f} s for the bounds")
        if not self._said and self.on_stage is not None and self.todo and self.took_s is not None:
            self._said = True
            self.on_stage(f"SOL: bounds ready in {self.took_s:.1f} s, alongside the evaluation")

    def stop(self) -> None:
        if self.thread.is_alive() and self.child is not None:
            self.child.abort()
        self.thread.join(timeout=limits.SOL_THREAD_JOIN_S)
        if self.child is not None:
            self.child.close()


def count_alongside(problem: Problem, cfg: EvalConfig, hw: str, cache: dict,
                     on_stage: Callable[[str], None] | None) -> "_CountAlongside | None":
    """Start counting the bounds of the workloads ``cfg`` selects that ``cache`` lacks (None
    when it holds them all)."""
    from ..harness import select_workloads

    try:
        chosen = select_workloads(problem, cfg)
    except Exception:  # noqa: BLE001 - a bad selection is the evaluator's error to report
        return None
    todo = sum(1 for w in chosen if _key(problem, w, hw) not in cache)
    if not todo:
        return None
    if on_stage is not None:
        on_stage(f"SOL: counting the bounds of {todo} workload(s) for {hw} alongside the evaluation")
    return _CountAlongside(problem, [w.uuid for w in chosen], hw, cache, todo, on_stage)




class SolStep:
    """The SOL step the evaluator is handed (``TraceContext.sol``): for one workload's
    measured performance, the SOL block and the finding of the time against the bound.

    ``counting``: the bounds being counted alongside the evaluation (:func:`count_alongside`),
    waited for only by a trace that needs its bound. A candidate time below T_SOL is judged
    by :func:`solbench.sol.classify_against_sol`: below the certain floor (compulsory output
    bytes beyond L2 at peak bandwidth) it is impossible (``faster_than_sol``, which decides
    REWARD_HACK); above that floor a defect of the model (``sol_bound_violated``, advisory;
    the score stays capped at 1). An unresolved CPU time is never judged against the bound
    (it can read anything down to the sample floor, far below any T_SOL)."""

    def __init__(self, problem: Problem, hardware: str, model: str = "refined",
                 cache: dict | None = None, counting: "_CountAlongside | None" = None):
        self.problem, self.hardware, self.model = problem, hardware, model
        self.cache = cache if cache is not None else {}
        self.counting = counting

    def __call__(self, workload: Workload, perf: Performance,
                 timing: TimingStats | None) -> tuple[SolBlock, list[Finding]]:
        from ..sol import classify_against_sol, sol_finding

        self.wait()
        block = sol_block_of(self.problem, workload, perf, timing, self.hardware, self.model, self.cache)
        verdict = None if block.unresolved else classify_against_sol(
            perf.latency_ms, block.sol_ms, block.t_certain_ms)
        if verdict is None:
            return block, []
        d = sol_finding(verdict, perf.latency_ms, block.model_dump(mode="json"), workload.uuid)
        return block, [finding(d["check"], d["message"], d.get("evidence") or {},
                               advisory=d.get("severity") == "advisory")]

    def wait(self) -> None:
        """Join the count of the bounds (a passing trace is judged against its bound)."""
        if self.counting is not None:
            self.counting.wait()

    def stop(self) -> None:
        """Stop a count still running (the evaluation ended early)."""
        if self.counting is not None:
            self.counting.stop()
