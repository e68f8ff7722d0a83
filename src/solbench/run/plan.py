"""The plan of a run: (problem, candidate, workloads) pairs, resumable.

Layout of a solutions directory: ``<solutions>/<problem name>/<candidate>.json`` (a
solution.json) or ``<candidate>.py`` (a KernelBench ``ModelNew`` file or a plain ``run``);
the candidate's file stem (``compile``, ``triton``, ...) is its *label*, the family the
summary groups by and every trace records (``evaluation.label``) for report and compare;
``solbench baseline`` writes ``eager.json`` and ``compile.json`` (an older
``solution_<label>.json`` is labelled ``<label>``; a bare ``solution.json`` by its
solution's name). A ``.py`` file that a solution.json of the same folder lists among its
sources belongs to that solution and is not a candidate of its own.

With ``resume``, each (solution hash, workload uuid) already in the results file is
skipped, so an interrupted run continues where it stopped and a changed solution is
evaluated afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..errors import SolbenchError, SpecError
from ..spec import Problem, Trace, Workload, load_problem, load_solution
from ..spec.solution import Solution


@dataclass
class Candidate:
    """One solution file of one problem, loaded (or the reason it could not be)."""

    path: Path
    label: str
    solution: Solution | None
    solution_hash: str
    load_error: str | None = None


@dataclass
class PairPlan:
    """One problem x candidate pair and the workloads still to evaluate."""

    problem: Problem
    candidate: Candidate
    todo: list[Workload]
    done: int


@dataclass
class RunPlan:
    pairs: list[PairPlan]
    problems_without_solutions: list[str] = field(default_factory=list)
    #: (problem path, one-line reason) of each problem that did not load or whose workloads
    #: could not be chosen: recorded and left out, the run goes on
    invalid_problems: list[tuple[str, str]] = field(default_factory=list)

    @property
    def todo_workloads(self) -> int:
        return sum(len(p.todo) for p in self.pairs)

    @property
    def skipped_workloads(self) -> int:
        return sum(p.done for p in self.pairs)


# --- results file -------------------------------------------------------------------------
def read_results(path: Path) -> list[Trace]:
    """Traces of a results file (missing file: empty). Raises SpecError naming the line of a
    malformed trace. (The trace store's reader; kept under this name for the runner.)"""
    from ..store import read_traces

    return read_traces(path)


def result_key(trace: Trace) -> tuple[str, str] | None:
    """The resume key (solution hash, workload uuid) of a trace; None without a hash."""
    h = trace.evaluation.solution_hash
    return (h, trace.workload.uuid) if h else None


def done_keys(traces: Iterable[Trace]) -> set[tuple[str, str]]:
    return {k for k in (result_key(t) for t in traces) if k is not None}


def append_traces(path: Path, traces: Iterable[Trace]) -> None:
    """Append traces as signed strict JSON lines (the trace store's writer, ``solbench.store``)."""
    from ..store import append_traces as store_append

    store_append(path, traces)


# --- discovery ----------------------------------------------------------------------------
def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def candidate_files(solutions_dir: Path, problem: Problem) -> list[Path]:
    """Solution files for ``problem``: ``<solutions>/<definition name>/`` or, failing that,
    ``<solutions>/<problem folder name>/``; ``*.json`` and ``*.py``, sorted, skipping files
    that start with ``_`` or ``.`` and ``.py`` files some ``.json`` there lists as a source."""
    names = [problem.name]
    if problem.path.name != problem.name:
        names.append(problem.path.stem if problem.path.is_file() else problem.path.name)
    # a name is one folder of the solutions directory: a definition named '../x' or 'a/b'
    # would take candidates from outside it
    names = [n for n in names if n and n not in (".", "..") and Path(n).name == n and "\\" not in n]
    for n in names:
        d = Path(solutions_dir) / n
        if d.is_dir():
            break
    else:
        return []
    files = sorted(p for p in d.iterdir()
                   if p.is_file() and p.suffix in (".json", ".py") and p.name[0] not in "_.")
    owned: set[str] = set()
    for f in files:
        if f.suffix == ".json":
            try:
                raw = json.loads(f.read_text())
                for s in raw.get("sources") or []:
                    if isinstance(s, dict) and isinstance(s.get("path"), str):
                        owned.add(s["path"])
            except (ValueError, AttributeError):
                pass
    return [f for f in files if not (f.suffix == ".py" and f.name in owned)]


def _generation_error(path: Path) -> str | None:
    """``generation failed: STATUS: message`` for a ``.json`` holding ``generation_error``
    (written by ``solbench generate`` when the model's reply had no usable code), else None."""
    if path.suffix != ".json":
        return None
    try:
        g = json.loads(path.read_text()).get("generation_error")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(g, dict):
        return None
    return f"generation failed: {g.get('status', '?')}: {g.get('message', '')}"


def load_candidate(path: Path, problem: Problem) -> Candidate:
    label = path.stem
    for prefix in ("solution_", "solution-"):  # solbench baseline's solution_eager.json ...
        if label.startswith(prefix) and len(label) > len(prefix):
            label = label[len(prefix):]
    failed = _generation_error(path)
    if failed is not None:  # solbench generate's record of a model that gave no candidate
        return Candidate(path=path, label=label, solution=None, solution_hash=_file_hash(path),
                         load_error=failed)
    try:
        sol = load_solution(path, problem)
    except (SolbenchError, OSError, SyntaxError, ValueError) as e:
        return Candidate(path=path, label=label, solution=None, solution_hash=_file_hash(path),
                         load_error=str(e))
    if label == "solution":  # DIR/<problem>/solution.json: name the family after the solution
        from ..report.records import canonical_label

        label = sol.name
        for prefix in (f"{problem.name}__", f"{problem.name}_", f"{problem.name}-"):
            if label.startswith(prefix) and len(label) > len(prefix):
                label = label[len(prefix):]
                break
        label = canonical_label(label)
    return Candidate(path=path, label=label, solution=sol, solution_hash=sol.content_hash())


def plan_run(problem_paths: list[Path], solutions_dir: Path, done: set[tuple[str, str]],
             tags: list[str] | None = None, workload_limit: int | None = None,
             exclude_tags: list[str] | None = None,
             shard: tuple[int, int] | None = None,
             select: Callable[[Problem, list[Workload]], list[Workload]] | None = None) -> RunPlan:
    """Pairs to evaluate: every problem x candidate, minus workloads in ``done``.

    ``tags``: keep only workloads carrying all of these tags (e.g. ["cpu"]);
    ``exclude_tags``: drop workloads carrying any of these tags (e.g. ["cpu"] on a GPU, to
    time only the model-size workloads; ["needs-cuda"] on a CPU: a problem's capability tags
    count as its workloads' tags);
    ``workload_limit``: keep the first N workloads of each problem (after tag filtering);
    ``shard``: (i, n) keeps the problems whose position in ``problem_paths`` is i mod n, so n
    processes (one per GPU) split a suite without overlap;
    ``select``: (problem, workloads after the tag filters) -> the workloads to keep (the CLI's
    ``--workloads/--limit/--max-bytes``); it may raise SpecError naming the problem.
    A problem that does not load (or whose ``select`` raises SpecError) is recorded in
    ``invalid_problems`` and left out. Raises SpecError when ``solutions_dir`` is not a
    directory; ValueError when ``shard`` is not 0 <= i < n.
    """
    if shard is not None:
        i, n = shard
        if not (n >= 1 and 0 <= i < n):
            raise ValueError(f"shard {i}/{n}: need 0 <= i < n")
        problem_paths = [p for k, p in enumerate(problem_paths) if k % n == i]
    solutions_dir = Path(solutions_dir)
    if not solutions_dir.is_dir():
        raise SpecError(solutions_dir, "", "solutions directory not found")
    plan = RunPlan(pairs=[])
    for pp in problem_paths:
        problem = load_or_record(pp, plan)
        if problem is None:
            continue
        wls = [w for w in problem.workloads if workload_tags_match(problem, w, tags, exclude_tags)]
        if workload_limit is not None:
            wls = wls[:workload_limit]
        if select is not None:
            try:
                wls = select(problem, wls)
            except SpecError as e:
                plan.invalid_problems.append((str(pp), str(e)))
                continue
        files = candidate_files(solutions_dir, problem)
        if not files:
            plan.problems_without_solutions.append(problem.name)
            continue
        for f in files:
            cand = load_candidate(f, problem)
            todo = [w for w in wls if (cand.solution_hash, w.uuid) not in done]
            plan.pairs.append(PairPlan(problem=problem, candidate=cand, todo=todo,
                                       done=len(wls) - len(todo)))
    return plan


def load_or_record(path: Path, plan: RunPlan) -> Problem | None:
    """The problem at ``path``, or None after recording in ``plan.invalid_problems`` why it
    did not load (a malformed definition or workload file, a KernelBench file that fails to
    import or run on the CPU): one invalid problem never stops a run over a folder."""
    try:
        return load_problem(path)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - any failure of the problem's own code
        msg = str(e) if isinstance(e, SolbenchError) else f"{type(e).__name__}: {e}"
        plan.invalid_problems.append((str(path), " ".join(msg.split())[:500]))
        return None


def workload_tags_match(problem: Problem, w: Workload, tags: list[str] | None,
                        exclude_tags: list[str] | None) -> bool:
    """Whether ``w`` carries every tag of ``tags`` and none of ``exclude_tags``, its tags
    being its own and its problem's capability tags (``needs-cuda``:
    :func:`solbench.spec.capability.capability_tags`)."""
    from ..spec.capability import capability_tags

    have = set(w.tags or [])
    if exclude_tags or tags:
        have |= set(capability_tags(problem.definition))
    return all(t in have for t in (tags or [])) and not any(t in have for t in (exclude_tags or []))


def device_notes(plan: RunPlan, device: str) -> list[str]:
    """One line per problem of ``plan`` that cannot run on ``device`` (its reference needs
    another: :func:`solbench.spec.capability.unmet_need`), said before the run starts; its
    workloads are recorded NOT_RUNNABLE without being run."""
    from ..spec.capability import unmet_need

    out, seen = [], set()
    for p in plan.pairs:
        if id(p.problem) in seen or not p.todo:
            continue
        seen.add(id(p.problem))
        need = unmet_need(p.problem.definition, device)
        if need is not None:
            out.append(f"{p.problem.name}: {need.reason} (recorded NOT_RUNNABLE on {device}; "
                       f"--exclude-tag {need.tag} leaves it out)")
    return out
