"""``solbench run``: evaluate every problem x solution pair of a suite, resumably.

The run itself lives in :mod:`solbench.run` (plan: :mod:`solbench.run.plan`, one problem at
a time: :mod:`solbench.run.session`, where traces go: :mod:`solbench.run.sinks`, the local
loop: :mod:`solbench.run.executors.local`); these names stay importable from here. What is
suite-specific stays: :func:`label_map` and :func:`write_eager_candidates`.

Results are strict JSON lines of :class:`~solbench.spec.Trace`, appended as each workload
finishes; every trace carries ``evaluation.solution_hash`` (sha256 of the solution's spec
and sources) and, with ``resume``, each (solution hash, workload uuid) already in the
results file is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from ..run.executors.base import RunOutcome, load_error_traces, pair_context
from ..run.executors.local import execute
from ..run.plan import (Candidate, PairPlan, RunPlan, append_traces, candidate_files, device_notes,
                        done_keys, load_candidate, load_or_record, plan_run, read_results,
                        result_key, workload_tags_match)
from ..run.session import Session, make_default_evaluator
from ..run.sinks import numbered
from ..spec import Problem, Solution, Trace, load_problem

#: evaluate(problem, solution, device, workload uuids) -> traces
Evaluator = Callable[[Problem, Solution, str, list[str]], list[Trace]]

#: the former name of :class:`solbench.run.session.Session`
_SharedEvaluator = Session

__all__ = ["Candidate", "Evaluator", "PairPlan", "RunOutcome", "RunPlan", "append_traces",
           "candidate_files", "device_notes", "done_keys", "execute", "label_map",
           "load_candidate", "load_error_traces", "load_or_record", "make_default_evaluator",
           "numbered", "pair_context", "plan_run", "read_results", "result_key",
           "workload_tags_match", "write_eager_candidates"]


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
