"""Moved to :mod:`solbench.languages` (spec validation reads the registry, so it sits below
spec: docs/architecture.md). This alias remains for harness/guards.py until it imports
:mod:`solbench.languages`; delete it then."""

from ..languages import *  # noqa: F401,F403
from ..languages import __all__  # noqa: F401
