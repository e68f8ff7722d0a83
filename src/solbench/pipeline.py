"""Former home of the evaluation pipeline, now :mod:`solbench.run` (``run.session``,
``run.sol``, ``run.context``); these names stay importable from here."""

from __future__ import annotations

from .run.context import static_audit_findings
from .run.session import evaluate_and_score
from .run.sol import (counts_cache, prime_sol, prime_sol_many, resolve_hardware, sol_block,
                      time_resolved)

__all__ = ["counts_cache", "evaluate_and_score", "prime_sol", "prime_sol_many", "resolve_hardware",
           "sol_block", "static_audit_findings", "time_resolved"]
