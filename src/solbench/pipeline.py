"""The evaluation pipeline the CLI and suites call: harness evaluation, then the SOL block
(bound, score) for each PASSED trace when the GPU's hardware spec is known.

Data flows one way: ``harness`` produces traces from evidence; this module adds the analytic
SOL figures (``sol``) to them. Neither of those modules imports the other.
"""

from __future__ import annotations

import time

from typing import Any, Callable

import torch

from .harness import EvalConfig
from .spec.problem import Problem
from .spec.solution import Solution
from .spec.trace import Finding, Status, Trace


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


def static_audit_findings(problem: Problem, solution: Solution) -> list[Finding]:
    """The static audit's advisory findings (rule, file:line, snippet) for ``solution``; none
    for the reference. Advisory only: runtime evidence decides verdicts."""
    if solution.author == "reference":
        return []
    try:
        from .integrity.static_audit import audit_solution

        return list(audit_solution(solution, problem.definition))
    except Exception as e:  # noqa: BLE001 - the audit never blocks an evaluation
        return [Finding(check="audit.failed", severity="advisory", message=f"{type(e).__name__}: {e}")]


def _with_findings(trace: Trace, found: list[Finding]) -> Trace:
    if not found:
        return trace
    ev = trace.evaluation.model_copy(deep=True)
    ev.findings.extend(f.model_copy() for f in found)
    return trace.model_copy(update={"evaluation": ev})


def attach_static_audit(problem: Problem, solution: Solution, traces: list[Trace]) -> list[Trace]:
    """Append the static audit's advisory findings (rule, file:line, snippet) to each trace.
    Advisory only: runtime evidence decides verdicts."""
    found = static_audit_findings(problem, solution)
    return [_with_findings(t, found) for t in traces]


def evaluate_and_score(problem: Problem, solution: Solution, config: EvalConfig | None = None,
                       hardware: str | None = None, sol_model: str = "refined",
                       evaluator=None, on_trace: Callable[[Trace], None] | None = None) -> list[Trace]:
    """Evaluate and attach the SOL block to each PASSED trace.

    ``evaluator``: a ``harness.Evaluator`` of ``problem`` to reuse (its reference-timing
    worker then serves several candidates in turn; ``config`` replaces its settings).
    ``on_trace``: called with each finished trace (static audit and SOL block attached) as
    soon as its workload is done, before the next one starts: to store it and show progress.

    A candidate time below T_SOL is never scored: when the eager reference also beats the
    bound, the bound is suspect (finding ``sol_bound_violated``, advisory); when only the
    candidate does, the measurement cannot be trusted (finding ``faster_than_sol``, which
    decides REWARD_HACK).
    """
    from .harness import Evaluator

    cfg = config or EvalConfig()
    found = static_audit_findings(problem, solution)
    hw = resolve_hardware(cfg.device, hardware)
    cache: dict = {}
    out: list[Trace] = []

    def finish(t: Trace) -> None:
        t = _with_findings(t, found)
        if hw is not None:
            t = _score(problem, t, hw, sol_model, cache)
        out.append(t)
        if on_trace is not None:
            on_trace(t)

    if evaluator is not None:
        if evaluator.problem is not problem:
            raise ValueError("evaluator was made for another problem")
        evaluator.cfg = cfg
        evaluator.evaluate(solution, on_trace=finish)
    else:
        ev = Evaluator(problem, cfg)
        try:
            ev.evaluate(solution, on_trace=finish)
        finally:
            ev.close()
    return out


def _score(problem: Problem, t: Trace, hw: str, sol_model: str, cache: dict) -> Trace:
    """``t`` with its SOL block (PASSED traces with a performance only)."""
    if t.evaluation.status != Status.PASSED or t.evaluation.performance is None:
        return t
    t0 = time.perf_counter()
    block = sol_block(problem, t, hw, sol_model, cache)
    ev = t.evaluation.model_copy(deep=True)
    ev.sol = block
    ev.phases_s = {**(ev.phases_s or {}), "sol": round(time.perf_counter() - t0, 3)}
    sol_ms = block.get("sol_ms")
    perf = ev.performance
    if sol_ms and perf is not None and perf.latency_ms < sol_ms:
        ref_below = perf.reference_latency_ms is not None and perf.reference_latency_ms < sol_ms
        if ref_below:
            ev.findings.append(Finding(
                check="sol_bound_violated", severity="advisory",
                message=(f"both the candidate ({perf.latency_ms:.4g} ms) and the eager reference "
                         f"({perf.reference_latency_ms:.4g} ms) beat T_SOL {sol_ms:.4g} ms: "
                         "the bound is wrong for this workload; no score"),
                evidence={"sol_ms": sol_ms}))
            ev.sol["score"] = None
        else:
            ev.findings.append(Finding(
                check="faster_than_sol", severity="hack",
                message=(f"measured {perf.latency_ms:.4g} ms is below the speed-of-light bound "
                         f"{sol_ms:.4g} ms on {hw}: a broken measurement or tampering"),
                evidence={"latency_ms": perf.latency_ms, "sol_ms": sol_ms}))
            ev.sol["score"] = None
            ev.status = Status.REWARD_HACK
            ev.performance = None
    t = t.model_copy(update={"evaluation": ev})
    return Trace.model_validate(t.model_dump())
