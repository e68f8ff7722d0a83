"""``solbench run``: evaluate every problem x solution pair of a suite, resumably.

Layout of a solutions directory: ``<solutions>/<problem name>/<candidate>.json`` (a
solution.json) or ``<candidate>.py`` (a KernelBench ``ModelNew`` file or a plain ``run``);
the candidate's file stem (``compile``, ``triton``, ...) is its *label*, the family the
summary groups by and every trace records (``evaluation.label``) for report and compare;
``solbench baseline`` writes ``eager.json`` and ``compile.json`` (an older
``solution_<label>.json`` is labelled ``<label>``; a bare ``solution.json`` by its
solution's name). A ``.py`` file that a solution.json of the same folder lists among its
sources belongs to that solution and is not a candidate of its own.

Results are strict JSON lines of :class:`~solbench.spec.Trace`, appended as each pair
finishes. Every trace written carries ``evaluation.solution_hash`` (sha256 of the solution's
spec and sources). With ``resume``, each (solution hash, workload uuid) already in the
results file is skipped, so an interrupted run continues where it stopped and a changed
solution is evaluated afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..errors import SolbenchError, SpecError
from ..spec import Problem, Solution, Trace, Workload, load_problem, load_solution
from ..spec.trace import Environment, Evaluation, Status

#: evaluate(problem, solution, device, workload uuids) -> traces
Evaluator = Callable[[Problem, Solution, str, list[str]], list[Trace]]


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


# --- evaluation ---------------------------------------------------------------------------
def load_error_traces(pair: PairPlan, device: str, executor=None) -> list[Trace]:
    """COMPILE_ERROR traces for a candidate file that did not even load (bad JSON, missing
    entry point...), one per workload, so the summary counts it as incorrect. ``executor``:
    the :class:`~solbench.spec.trace.ExecutorStamp` of who recorded them."""
    cand = pair.candidate
    name = f"{pair.problem.name}__{cand.label}"
    out = []
    for w in pair.todo:
        ev = Evaluation(status=Status.COMPILE_ERROR,
                        log=f"solution {cand.path} failed to load: {cand.load_error}"[:4000],
                        environment=Environment(hardware=device), solution_hash=cand.solution_hash,
                        label=cand.label, executor=executor, device=device)
        out.append(Trace(definition=pair.problem.name, solution=name, workload=w, evaluation=ev))
    return out


@dataclass
class RunOutcome:
    traces: list[Trace]  # written in this run
    harness_errors: list[str]  # pairs the evaluator itself failed on (not written)


def pair_context(pair: PairPlan, **changes):
    """The :class:`~solbench.run.context.TraceContext` of a pair: its candidate's solution
    hash (of the file as planned, the resume key) and label, and ``changes``."""
    from ..run.context import TraceContext

    return TraceContext(solution_hash=pair.candidate.solution_hash, label=pair.candidate.label, **changes)


def numbered(traces: list[Trace], seq0: int) -> list[Trace]:
    """``traces`` with ``executor.seq`` set to their 1-based position among the traces the
    run wrote (``seq0`` written before them); a trace without an executor stamp keeps none.
    Numbered where the trace is written, the one thing about it not known before the harness
    ran."""
    out = []
    for i, t in enumerate(traces):
        ex = t.evaluation.executor
        if ex is not None:
            ev = t.evaluation.model_copy(update={"executor": ex.model_copy(update={"seq": seq0 + i + 1})})
            t = t.model_copy(update={"evaluation": ev})
        out.append(t)
    return out


def execute(plan: RunPlan, results_path: Path, device: str,
            evaluator: Evaluator | None = None,
            on_pair_done: Callable[[PairPlan, list[Trace]], None] | None = None,
            eval_options: dict | None = None,
            on_trace: Callable[[PairPlan, Trace], None] | None = None,
            context=None) -> RunOutcome:
    """Evaluate every pair of ``plan`` with work left, appending traces to ``results_path``.
    The default evaluator appends each trace as soon as its workload finishes (and calls
    ``on_trace(pair, trace)`` after writing it), so a killed run keeps every finished
    workload; a given ``evaluator`` has its traces appended after each pair. Every trace
    carries the candidate's solution hash and label (through the pair's
    :class:`~solbench.run.context.TraceContext`, or set on the traces of an evaluator that
    takes none); ``context``: fields every pair's context gets (an executor stamp). An
    exception from the evaluator itself (not a candidate failure, which the harness turns
    into a trace) is reported in ``harness_errors`` and the pair's remaining workloads are not
    written, so a resumed run retries them. ``eval_options`` go to the default evaluator's
    EvalConfig."""
    shared = None
    extra = dict(context or {})
    if evaluator is None:
        shared = make_default_evaluator(eval_options)
        evaluator = shared
        # the SOL bounds of every pair's workloads in one counting child before the first timed
        # window (a child is an interpreter and torch's import: seconds), while the spare
        # workers start; without this each problem's first pair started a child of its own
        work: dict[int, tuple[Problem, list[str]]] = {}
        for pair in plan.pairs:
            if pair.todo and pair.candidate.solution is not None:
                uuids = work.setdefault(id(pair.problem), (pair.problem, []))[1]
                uuids.extend(w.uuid for w in pair.todo if w.uuid not in uuids)
        try:
            shared.start_ahead(device, list(work.values()))
        except Exception:  # noqa: BLE001 - each pair starts what it needs itself, as before
            pass
    written: list[Trace] = []
    errors: list[str] = []

    def write(pair: PairPlan, traces: list[Trace]) -> list[Trace]:
        traces = numbered(traces, len(written))
        append_traces(results_path, traces)
        written.extend(traces)
        if on_trace is not None:
            for t in traces:
                on_trace(pair, t)
        return traces

    for pair in plan.pairs:
        if not pair.todo:
            if on_pair_done:
                on_pair_done(pair, [])
            continue
        cand = pair.candidate
        streamed: list[Trace] = []

        def stream(t: Trace, pair=pair, streamed=streamed) -> None:
            streamed.extend(write(pair, [t]))

        if cand.solution is None:
            traces = write(pair, load_error_traces(pair, device, executor=extra.get("executor")))
        else:
            try:
                if isinstance(evaluator, _SharedEvaluator) or getattr(evaluator, "streams", False):
                    got = evaluator(pair.problem, cand.solution, device, [w.uuid for w in pair.todo],
                                    on_trace=stream, context=pair_context(pair, **extra))
                else:
                    got = evaluator(pair.problem, cand.solution, device, [w.uuid for w in pair.todo])
                    got = [t.model_copy(update={"evaluation": t.evaluation.model_copy(update={
                        "solution_hash": cand.solution_hash, "label": cand.label})}) for t in got]
            except Exception as e:  # noqa: BLE001 - keep the run going, report the pair
                errors.append(f"{pair.problem.name} / {cand.path.name}: "
                              f"{type(e).__name__}: {e}")
                got = list(streamed)
            # a streaming evaluator hands its traces over in order as it makes them
            traces = streamed + write(pair, got[len(streamed):])
        if on_pair_done:
            on_pair_done(pair, traces)
    if shared is not None and hasattr(shared, "close"):
        shared.close()
    return RunOutcome(traces=written, harness_errors=errors)


def make_default_evaluator(options: dict | None = None) -> Evaluator:
    """The evaluator :func:`execute` uses when none is given (a :class:`_SharedEvaluator`)."""
    return _SharedEvaluator(options)


class _SharedEvaluator:
    """The default evaluator of :func:`execute`: one ``harness.Evaluator`` per problem, kept
    while consecutive pairs share that problem, so the eager reference's timing worker is
    started once per problem instead of once per candidate (about 4 s each on the H200).
    The harness drops that worker after a candidate that crashed, hung or cheated. One
    :class:`~solbench.harness.workers.SparePool` serves every problem of the run
    (``spare_workers``): each pair takes its workers already started. The SOL bounds of a
    (problem, workload) are worked out once per run and shared by its candidates."""

    #: accepts ``on_trace`` and calls it as each workload finishes
    streams = True

    def __init__(self, options: dict | None):
        self.options = dict(options or {})
        self.key = None
        self.ev = None
        self.spares = None  # workers started ahead, shared by the run's problems
        self.sol_cache: dict = {}  # SOL bounds of (problem, workload, hardware): pipeline.sol_block

    def __call__(self, problem: Problem, solution: Solution, device: str,
                 uuids: list[str], on_trace: Callable[[Trace], None] | None = None,
                 context=None) -> list[Trace]:
        from .. import harness
        from ..harness.workers import SparePool
        from ..run.session import evaluate_and_score

        config = harness.EvalConfig(device=device, workloads=list(uuids), **self.options)
        key = (id(problem), device)
        n_spares = self._n_spares(config, device)
        if self.ev is None or self.key != key:
            self.close_evaluator()
            if n_spares > 0 and (self.spares is None or self.spares.device != device):
                self.close_spares()
                self.spares = SparePool(device, n_spares)
            self.ev = harness.Evaluator(problem, config, spares=self.spares if n_spares > 0 else None)
            self.key = key
        return list(evaluate_and_score(problem, solution, config, evaluator=self.ev,
                                       on_trace=on_trace, sol_cache=self.sol_cache, context=context))

    def _n_spares(self, config, device: str) -> int:
        if "spare_workers" not in self.options and not device.startswith("cuda"):
            # on the CPU the spares are opt-in: their start-up competes for the same few cores
            # as the timed calls (a reference was once flagged implausible under that load)
            return 0
        return config.spare_workers

    def start_ahead(self, device: str, sol_work: Iterable[tuple[Problem, list[str]]] = ()) -> None:
        """Before the first pair: start the spare workers (when this device uses them), then,
        while they start in their own processes, work out the SOL bounds of ``sol_work``
        ((problem, workload uuids) pairs) in this thread, so neither waits on the other and
        no timed window is open yet. Raises nothing for a bound that cannot be counted."""
        from .. import harness
        from ..harness.workers import SparePool
        from ..run.sol import prime_sol_many, resolve_hardware

        n = self._n_spares(harness.EvalConfig(device=device, **self.options), device)
        if n > 0 and self.spares is None:
            self.spares = SparePool(device, n)
        if self.spares is not None:
            self.spares.fill()
        hw = resolve_hardware(device, None)
        prime_sol_many([(problem, list(uuids)) for problem, uuids in sol_work], hw, self.sol_cache)

    def close_evaluator(self) -> None:
        if self.ev is not None:
            self.ev.close()
        self.ev = None
        self.key = None

    def close_spares(self) -> None:
        if self.spares is not None:
            self.spares.close()
        self.spares = None

    def close(self) -> None:
        self.close_evaluator()
        self.close_spares()


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
