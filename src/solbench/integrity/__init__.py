"""Integrity: the static audit of candidate sources (advisory), the trivial-candidate screen
of problems, and the adversarial corpus runner.

Imports are lazy so that ``solbench.integrity.static_audit`` stays importable without the
harness (the screen needs ``solbench.harness.correctness`` and ``solbench.inputs``).
"""

from __future__ import annotations

__all__ = ["audit_sources", "audit_solution", "screen_problem", "ScreenResult"]


def __getattr__(name: str):
    if name in ("audit_sources", "audit_solution"):
        from . import static_audit

        return getattr(static_audit, name)
    if name in ("screen_problem", "ScreenResult"):
        from . import screen

        return getattr(screen, name)
    raise AttributeError(name)
