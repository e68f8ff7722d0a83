"""Moved to :mod:`solbench.inputs.seeds` (the seeds of input sets sit with input generation,
below the harness, so the integrity screen and the store use them without reaching into the
harness: docs/architecture.md). This alias remains for harness/evaluator.py until it imports
:mod:`solbench.inputs.seeds`; delete it then."""

from ..inputs.seeds import InputSeeds, derived_seed, fingerprint  # noqa: F401
