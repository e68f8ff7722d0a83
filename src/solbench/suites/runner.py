"""What of ``solbench run`` is suite-specific: :func:`label_map` (solution hash -> label, for
summaries) and :func:`write_eager_candidates` (a suite's eager baseline). The run itself is
:mod:`solbench.run` (plan: :mod:`solbench.run.plan`, one problem at a time:
:mod:`solbench.run.session`, where traces go: :mod:`solbench.run.sinks`, executors:
:mod:`solbench.run.executors`).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..run.plan import RunPlan
from ..spec import load_problem


def label_map(plan: RunPlan) -> dict[str, str]:
    """solution hash -> candidate label (file stem), for grouping summaries."""
    return {p.candidate.solution_hash: p.candidate.label for p in plan.pairs}


def write_eager_candidates(problem_paths: list[Path], out_dir: Path, label: str = "eager") -> list[Path]:
    """Write each problem's reference, packaged as a candidate (``reference_solution``), to
    ``<out_dir>/<problem name>/<label>.json``: the eager baseline of a suite run. Returns the
    written paths. Raises SpecError when a problem does not load."""
    from ..spec import reference_solution

    written = []
    for pp in problem_paths:
        problem = load_problem(pp)
        sol = reference_solution(problem)
        d = Path(out_dir) / problem.name
        d.mkdir(parents=True, exist_ok=True)
        f = d / f"{label}.json"
        f.write_text(json.dumps(sol.model_dump(mode="json", exclude_none=True), indent=1))
        written.append(f)
    return written
