"""How a measured time stands against the speed-of-light bounds (pure; the verdict calls it).

Two bounds (docs/sol-model.md, refined conventions R1-R5):

* ``t_certain_ms``: the certain floor, compulsory output bytes beyond L2 at peak DRAM
  bandwidth. No correct kernel can be faster: a measurement below it is a broken measurement
  or tampering (``faster_than_sol``, severity "hack").
* ``t_sol_ms``: the model's bound (refined or solar). It rests on modelling conventions (which
  inputs must be read, at which precision products can run); a correct kernel below it means
  one of them is wrong for this workload: an advisory ``sol_bound_violated`` that names the
  workload and the bound's terms, and the SOL score is capped at 1 (never a status).
"""

from __future__ import annotations

import math
from typing import Any, Literal

Verdict = Literal["hack", "advisory"]


def classify_against_sol(measured_ms: float | None, t_sol_ms: float | None,
                         t_certain_ms: float | None) -> Verdict | None:
    """``"hack"`` below the certain floor, ``"advisory"`` below T_SOL only, else None.

    Args:
        measured_ms: the candidate's measured time (ms); None or non-finite: None.
        t_sol_ms: the model's T_SOL (ms); None or 0 disables the advisory.
        t_certain_ms: the certain floor (ms); None or 0 disables the hack verdict.
    """
    if measured_ms is None or not math.isfinite(measured_ms) or measured_ms <= 0:
        return None
    if t_certain_ms and measured_ms < t_certain_ms:
        return "hack"
    if t_sol_ms and measured_ms < t_sol_ms:
        return "advisory"
    return None


def sol_finding(verdict: Verdict, measured_ms: float, block: dict[str, Any],
                workload_uuid: str | None) -> dict[str, Any]:
    """The finding (check, severity, message, evidence) for a :func:`classify_against_sol`
    verdict, from a trace's SOL block (``solbench.run.sol.sol_block``)."""
    hw = block.get("hardware")
    t_sol = block.get("sol_ms")
    t_cert = block.get("t_certain_ms") or 0.0
    bnd = block.get("bound") or {}
    ev = {"workload": workload_uuid, "latency_ms": measured_ms, "sol_ms": t_sol,
          "t_certain_ms": t_cert, "model": block.get("model"), "hardware": hw,
          "bottleneck": bnd.get("bottleneck"), "terms_ms": bnd.get("terms_ms"),
          "flops": bnd.get("flops"), "bytes_model": bnd.get("bytes_model")}
    if verdict == "hack":
        return {"check": "faster_than_sol", "severity": "hack", "evidence": ev, "message": (
            f"workload {workload_uuid}: measured {measured_ms:.4g} ms is below the certain floor "
            f"{t_cert:.4g} ms on {hw} (its outputs' compulsory bytes beyond L2 at peak DRAM "
            "bandwidth): a broken measurement or tampering")}
    terms = ", ".join(f"{k} {v:.4g}" for k, v in (bnd.get("terms_ms") or {}).items())
    return {"check": "sol_bound_violated", "severity": "advisory", "evidence": ev, "message": (
        f"workload {workload_uuid}: measured {measured_ms:.4g} ms beats the {block.get('model')} "
        f"T_SOL {t_sol:.4g} ms on {hw} (bound by {bnd.get('bottleneck')}; terms ms: {terms}) but "
        f"not the certain floor {t_cert:.4g} ms: a defect of the model for this workload; "
        "SOL score capped at 1")}
