"""The isolated evaluation harness: worker process, build step, correctness, timing, guards.

Public entry: :func:`evaluate` with an :class:`EvalConfig`. Besides it, the layers above
may use :class:`Oracle` (the trusted reference run in the parent: outputs, fp64 truth, the
stress-round check; the integrity screen judges a problem's reference with it) and the pure
modules :mod:`.correctness` and :mod:`.precision`. The other modules are the harness's own
(an import-linter contract in pyproject.toml keeps them so: docs/architecture.md).
"""

from .evaluator import EvalConfig, Evaluator, evaluate
from .rounds import Oracle

__all__ = ["EvalConfig", "Evaluator", "Oracle", "evaluate"]
