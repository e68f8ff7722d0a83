"""The evaluation pipeline the CLI and suites call: harness evaluation, then the SOL block
(bound, score) for each PASSED trace when the GPU's hardware spec is known.

Data flows one way: ``harness`` produces traces from evidence; this module adds the analytic
SOL figures (``sol``) to them. Neither of those modules imports the other.
"""

from __future__ import annotations

import time

from typing import Any

import torch

from .harness import EvalConfig, evaluate
from .harness.checks import finding
from .harness.verdict import rejudge, sol_findings
from .spec.problem import Problem
from .spec.solution import Solution
from .spec.trace import Status, Trace


def resolve_hardware(device: str, hardware: str | None) -> str | None:
    """The hardware spec to use: ``hardware`` if given ("none" disables SOL), else the bundled
    spec matching the CUDA device's name, else None (CPU: no SOL)."""
    if hardware is not None:
        return None if hardware.lower() == "none" else hardware
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return None
    from .sol import hardware_for_device_name

    return hardware_for_device_name(torch.cuda.get_device_name(torch.device(device)))


def sol_block(problem: Problem, trace: Trace, hardware: str, model: str = "refined",
              cache: dict | None = None) -> dict[str, Any]:
    """SOL figures for one trace: bound terms, T_SOL (ms), score and headroom h against the
    eager reference measured in the same run. Raises nothing: a counting failure is recorded
    as ``{"error": ...}``."""
    from .sol import bound, sol_score

    key = (trace.workload.uuid, hardware, model)
    try:
        if cache is not None and key in cache:
            b = cache[key]
        else:
            b = bound(problem, trace.workload, hardware=hardware, model=model)
            if cache is not None:
                cache[key] = b
    except Exception as e:  # noqa: BLE001 - the SOL block is best effort, never fatal
        return {"hardware": hardware, "model": model, "error": f"{type(e).__name__}: {e}"}
    block: dict[str, Any] = {"hardware": b.hardware, "model": model, "sol_ms": b.sol_ms,
                             "bound": b.model_dump(mode="json"), "baseline": "eager"}
    perf = trace.evaluation.performance
    if perf is not None and perf.reference_latency_ms:
        s = sol_score(perf.latency_ms, perf.reference_latency_ms, b.sol_ms, baseline="eager")
        block.update(s.model_dump(mode="json"))
    return block


def attach_static_audit(problem: Problem, solution: Solution, traces: list[Trace]) -> list[Trace]:
    """Append the static audit's advisory findings (rule, file:line, snippet) to each trace.
    Advisory only: runtime evidence decides verdicts."""
    if solution.author == "reference":
        return traces
    try:
        from .integrity.static_audit import audit_solution

        found = audit_solution(solution, problem.definition)
    except Exception as e:  # noqa: BLE001 - the audit never blocks an evaluation
        found = [finding("audit.failed", f"{type(e).__name__}: {e}")]
    if not found:
        return traces
    out = []
    for t in traces:
        ev = t.evaluation.model_copy(deep=True)
        ev.findings.extend(f.model_copy() for f in found)
        out.append(t.model_copy(update={"evaluation": ev}))
    return out


def evaluate_and_score(problem: Problem, solution: Solution, config: EvalConfig | None = None,
                       hardware: str | None = None, sol_model: str = "refined",
                       evaluator=None, on_trace=None) -> list[Trace]:
    """Evaluate and attach the static audit's findings and the SOL block to each trace.

    ``evaluator``: a ``harness.Evaluator`` of ``problem`` to reuse (its reference-timing
    worker then serves several candidates in turn; ``config`` replaces its settings).
    ``on_trace``: called with each finished trace (audit and SOL attached) as soon as its
    workload is done, before the next one runs.

    A candidate time below T_SOL is never scored; what it means for the status is the
    verdict's (:func:`solbench.harness.verdict.sol_findings`, :func:`~solbench.harness.verdict.rejudge`):
    ``sol_bound_violated`` (advisory) when the eager reference also beats the bound,
    ``faster_than_sol`` (REWARD_HACK) when only the candidate does.
    """
    cfg = config or EvalConfig()
    hw = resolve_hardware(cfg.device, hardware)
    cache: dict = {}
    audit: list = []
    out: list[Trace] = []

    def finish(t: Trace) -> None:
        if not audit:
            audit.append(attach_static_audit(problem, solution, [t])[0].evaluation.findings[
                len(t.evaluation.findings):])
        if audit[0]:
            ev = t.evaluation.model_copy(deep=True)
            ev.findings.extend(f.model_copy() for f in audit[0])
            t = t.model_copy(update={"evaluation": ev})
        if hw is not None:
            t = _with_sol(problem, t, hw, sol_model, cache)
        out.append(t)
        if on_trace is not None:
            on_trace(t)

    if evaluator is not None:
        if evaluator.problem is not problem:
            raise ValueError("evaluator was made for another problem")
        evaluator.cfg = cfg
        evaluator.evaluate(solution, on_trace=finish)
    else:
        evaluate(problem, solution, cfg, on_trace=finish)
    return out


def _with_sol(problem: Problem, t: Trace, hw: str, sol_model: str, cache: dict) -> Trace:
    if t.evaluation.status != Status.PASSED or t.evaluation.performance is None:
        return t
    t0 = time.perf_counter()
    block = sol_block(problem, t, hw, sol_model, cache)
    ev = t.evaluation.model_copy(deep=True)
    ev.sol = block
    ev.phases_s = {**(ev.phases_s or {}), "sol": round(time.perf_counter() - t0, 3)}
    perf = ev.performance
    t = t.model_copy(update={"evaluation": ev})
    found = sol_findings(perf.latency_ms, perf.reference_latency_ms, block.get("sol_ms"), hw)
    if found:
        # no score below T_SOL; the verdict decides what the finding means for the status
        t.evaluation.sol["score"] = None
        t = rejudge(t, found)
    return Trace.model_validate(t.model_dump())
