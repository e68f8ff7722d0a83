"""The isolated evaluation harness: worker process, build step, correctness, timing, guards.

Public entry: :func:`evaluate` with an :class:`EvalConfig`.
"""

from .evaluator import EvalConfig, Evaluator, evaluate

__all__ = ["EvalConfig", "Evaluator", "evaluate"]
