"""Trace storage: strict JSON lines, appended as results arrive, read back with validation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ..errors import SpecError
from ..spec.trace import Trace


def append_traces(path: str | Path, traces: Iterable[Trace]) -> int:
    """Append traces to ``path`` (created with its folder), one strict-JSON line each, flushed
    and fsynced so an interrupted run keeps what it finished. Returns the count written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "a") as f:
        for t in traces:
            f.write(t.to_json_line() + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    return n


def read_traces(path: str | Path) -> list[Trace]:
    """All traces in ``path`` (a missing file reads as none). Raises SpecError naming the line
    of a malformed trace."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Trace.from_json_line(line))
        except ValueError as e:
            raise SpecError(path, f"line {i}", f"not a valid trace: {str(e).splitlines()[0]}") from None
    return out


def done_keys(path: str | Path) -> set[tuple[str, str]]:
    """(solution hash, workload uuid) of every trace already stored (for --resume)."""
    return {(t.evaluation.solution_hash or "", t.workload.uuid) for t in read_traces(path)}
