"""Error types shared by every stage. Each names the file and field at fault."""

from __future__ import annotations

from pathlib import Path


class SolbenchError(Exception):
    """Base class of every error solbench raises on purpose."""


class SpecError(SolbenchError):
    """A problem, workload or solution file is invalid.

    Attributes:
        path: the file at fault (or None for in-memory objects).
        field: dotted path of the field at fault, e.g. ``inputs.x.dtype`` (or "" for the file).
        message: what is wrong, in one line.
    """

    def __init__(self, path: str | Path | None, field: str, message: str):
        self.path = str(path) if path is not None else None
        self.field = field
        self.message = message
        where = self.path or "<memory>"
        if field:
            where += f": {field}"
        super().__init__(f"{where}: {message}")


class MissingBlobError(SpecError):
    """A workload's safetensors input names a blob that is not on disk."""


class ConstraintError(SpecError):
    """A workload violates one of the definition's ``constraints``."""
