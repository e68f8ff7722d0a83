"""Batch runners in the layouts SOL-ExecBench and KernelBench users already have.

``solbench run-dataset ROOT``: like SOL-ExecBench's ``run_dataset.py``: ROOT holds subsets
(``L1``, ``L2``, ``Quant``, ...), each a folder of problem folders (definition.json +
workload.jsonl); the candidate of a problem is the file ``--solution-name`` inside the
problem's own folder (default ``solution.json``). Problems without that file are counted and
skipped, never evaluated as the reference.

``solbench run-kernelbench PROBLEMS CANDIDATES``: every KernelBench ``ModelNew`` file of a
folder against the KernelBench problem file it is named after, without moving anything:
a candidate matches the problem of the same file name, or the problem whose number (and
level, when both say it) it names, as in KernelBench's generated files
(``level_1_problem_36_sample_0_kernel.py`` -> ``level1/36_RMSNorm_.py``).

Both append traces to ``-o`` as each workload finishes, resume by (solution hash, workload
uuid), show progress with an ETA and end with the same tables as ``solbench run``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from .. import paths
from ..config import DEFAULTS
from . import options as opt
from .common import (LIMIT_HELP, MAX_BYTES_HELP, WORKLOADS_HELP, check_device, choose_workloads,
                     clean_errors, console, fail, parse_bytes)


def _is_problem_dir(p: Path) -> bool:
    return p.is_dir() and (p / "definition.json").is_file()


def _subset_dirs(root: Path, subsets: list[str] | None) -> list[Path]:
    """The subset folders of ``root`` (all of them, or those named), sorted. A root that is
    itself a subset (its folders are problems) is its own single subset."""
    if any(_is_problem_dir(p) for p in root.iterdir() if p.is_dir()):
        if subsets:
            fail(f"--subset: {root} holds problem folders directly, not subsets")
        return [root]
    have = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subsets:
        return have
    names = {p.name: p for p in have}
    missing = [s for s in subsets if s not in names]
    if missing:
        fail(f"--subset: {root} has no subset {', '.join(missing)} (it has: "
             f"{', '.join(names) or 'none'})")
    return [names[s] for s in subsets]


def dataset_problems(root: Path, subsets: list[str] | None) -> list[Path]:
    """Problem folders under ``root``'s subsets, in subset then name order."""
    out: list[Path] = []
    for sub in _subset_dirs(root, subsets):
        out.extend(sorted(p for p in sub.iterdir() if p.is_dir() and _is_problem_dir(p)))
    return out


EXCLUDE_TAG_HELP = ("leave out workloads with this tag (repeatable), their own or their problem's "
                    "capability tag: --exclude-tag needs-cuda on a CPU")

_NUM_RX = re.compile(r"^(\d+)_")
_KB_RX = re.compile(r"level_?(\d+).*?problem_?(\d+)", re.I)
_PROB_RX = re.compile(r"problem_?(\d+)", re.I)
_SAMPLE_RX = re.compile(r"sample_?(\d+)", re.I)


def _problem_key(p: Path) -> tuple[int | None, int | None]:
    """(level, number) of a KernelBench problem file: ``level1/36_RMSNorm_.py`` -> (1, 36)."""
    m = _NUM_RX.match(p.name)
    lv = re.search(r"level_?(\d+)", p.parent.name, re.I)
    return (int(lv.group(1)) if lv else None, int(m.group(1)) if m else None)


def match_kernelbench(problems: list[Path], candidates: list[Path]) -> tuple[dict[Path, list[Path]], list[Path]]:
    """Pair candidate files with problem files (see the module docstring). Returns
    ({problem: [candidates]}, unmatched candidates)."""
    by_name: dict[str, list[Path]] = {}
    by_key: dict[tuple, list[Path]] = {}
    for p in problems:
        by_name.setdefault(p.name, []).append(p)
        lv, n = _problem_key(p)
        if n is not None:
            by_key.setdefault((lv, n), []).append(p)
            by_key.setdefault((None, n), []).append(p)
    pairs: dict[Path, list[Path]] = {}
    unmatched = []
    for c in candidates:
        hit = None
        if len(by_name.get(c.name, [])) == 1:
            hit = by_name[c.name][0]
        else:
            m = _KB_RX.search(c.stem)
            if m:
                key = (int(m.group(1)), int(m.group(2)))
            else:
                m2 = _PROB_RX.search(c.stem) or _NUM_RX.match(c.name)
                key = (None, int(m2.group(1))) if m2 else None
            hits = by_key.get(key, []) if key else []
            if len(hits) == 1:
                hit = hits[0]
        if hit is None:
            unmatched.append(c)
        else:
            pairs.setdefault(hit, []).append(c)
    return pairs, unmatched


def register(app: typer.Typer) -> None:
    @app.command("run-dataset")
    def run_dataset(
        root: Path = typer.Argument(..., help="dataset root holding subsets (L1, L2, ...) of problem folders"),
        subset: Optional[str] = typer.Option(None, "--subset", help="comma-separated subsets (default: all)"),
        solution_name: str = typer.Option("solution.json", "--solution-name",
                                          help="the candidate's file name inside each problem folder"),
        limit: Optional[int] = typer.Option(None, "--limit", help="the first N problems (in subset, name order)"),
        problem: list[str] = typer.Option([], "--problem", help="only problems whose folder name matches this glob (repeatable)"),
        workloads: Optional[str] = typer.Option(None, "--workloads", "-w", help=WORKLOADS_HELP + " (per problem)"),
        workload_limit: Optional[int] = typer.Option(None, "--workload-limit", help=LIMIT_HELP + " per problem"),
        max_bytes: Optional[str] = typer.Option(None, "--max-bytes", help=MAX_BYTES_HELP),
        exclude_tag: list[str] = typer.Option([], "--exclude-tag", help=EXCLUDE_TAG_HELP),
        out: Path = typer.Option(paths.DEFAULT_RESULTS, "-o", "--out", help="results file (trace JSON lines, appended)"),
        resume: bool = typer.Option(False, "--resume", help="skip (solution hash, workload uuid) pairs already in the results file"),
        overwrite: bool = typer.Option(False, "--overwrite", help="start a fresh results file"),
        device: opt.Device = None,
        iters: opt.Iters = None,
        rounds: opt.Rounds = DEFAULTS.rounds,
        json_out: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    ) -> None:
        """Evaluate ROOT/<subset>/<problem>/<solution-name> for every problem of a
        SOL-ExecBench-style dataset (as upstream's run_dataset.py); resumable."""
        import fnmatch

        from ..errors import SpecError
        from ..run.plan import PairPlan, RunPlan, done_keys, load_candidate, load_or_record, workload_tags_match
        from .suite import open_results, run_and_report

        settings = opt.eval_config(rounds=rounds, iters=iters)
        if not root.is_dir():
            fail(f"{root}: no such dataset directory")
        if limit is not None and limit < 1:
            fail(f"--limit: must be >= 1, got {limit}")
        mb = parse_bytes(max_bytes)
        subsets = [x.strip() for x in subset.split(",") if x.strip()] if subset else None
        paths = dataset_problems(root, subsets)
        if problem:
            paths = [p for p in paths if any(fnmatch.fnmatch(p.name, g) for g in problem)]
        if limit is not None:
            paths = paths[:limit]
        if not paths:
            fail(f"{root}: no problem folders" + (f" in subsets {subset}" if subset else ""))
        dev = check_device(device)
        with clean_errors():
            previous = open_results(out, resume, overwrite)
            done = done_keys(previous)
            plan = RunPlan(pairs=[])
            for pp in paths:
                f = pp / solution_name
                if not f.is_file():
                    plan.problems_without_solutions.append(pp.name)
                    continue
                prob = load_or_record(pp, plan)
                if prob is None:
                    continue
                pool = [w for w in prob.workloads if workload_tags_match(prob, w, None, exclude_tag)]
                if not pool:  # every workload left out by --exclude-tag
                    continue
                try:
                    wls = choose_workloads(prob, workloads, workload_limit, mb, pool=pool)
                except SpecError as e:
                    plan.invalid_problems.append((str(pp), str(e)))
                    continue
                cand = load_candidate(f, prob)
                todo = [w for w in wls if (cand.solution_hash, w.uuid) not in done]
                plan.pairs.append(PairPlan(problem=prob, candidate=cand, todo=todo,
                                           done=len(wls) - len(todo)))
        if not plan.pairs and not plan.invalid_problems:
            fail(f"{root}: none of the {len(paths)} problem folders has a {solution_name}")
        _announce(plan, len(paths), dev, out, json_out,
                  f"{len(plan.problems_without_solutions)} problem folders have no {solution_name}")
        run_and_report(plan, out, opt.on_device(settings, dev), previous, json_out=json_out)

    @app.command("run-kernelbench")
    def run_kernelbench(
        problems: Path = typer.Argument(..., help="KernelBench problem files (a folder, searched recursively, e.g. KernelBench/level1)"),
        candidates: Path = typer.Argument(..., help="folder of ModelNew candidate .py files, named after their problems"),
        label: Optional[str] = typer.Option(None, "--label", help="candidate family in the summary (default: the candidates folder's name)"),
        out: Path = typer.Option(paths.DEFAULT_RESULTS, "-o", "--out", help="results file (trace JSON lines, appended)"),
        resume: bool = typer.Option(False, "--resume", help="skip (solution hash, workload uuid) pairs already in the results file"),
        overwrite: bool = typer.Option(False, "--overwrite", help="start a fresh results file"),
        limit: Optional[int] = typer.Option(None, "--limit", help="the first N matched problems"),
        exclude_tag: list[str] = typer.Option([], "--exclude-tag", help=EXCLUDE_TAG_HELP),
        device: opt.Device = None,
        iters: opt.Iters = None,
        rounds: opt.Rounds = DEFAULTS.rounds,
        json_out: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    ) -> None:
        """Evaluate a folder of KernelBench ModelNew files against the KernelBench problem files
        they are named after (same file name, or level/problem number), in place."""
        from ..run.plan import PairPlan, RunPlan, done_keys, load_candidate, load_or_record, workload_tags_match
        from .suite import open_results, run_and_report

        settings = opt.eval_config(rounds=rounds, iters=iters)
        for p, arg in ((problems, "PROBLEMS"), (candidates, "CANDIDATES")):
            if not p.exists():
                fail(f"{arg}: {p}: no such file or directory")
        probs = [problems] if problems.is_file() else sorted(
            p for p in problems.rglob("*.py") if not p.name.startswith(("_", ".")))
        cands = [candidates] if candidates.is_file() else sorted(
            p for p in candidates.rglob("*.py") if not p.name.startswith(("_", ".")))
        if not probs:
            fail(f"PROBLEMS: {problems}: no .py files")
        if not cands:
            fail(f"CANDIDATES: {candidates}: no .py files")
        pairs, unmatched = match_kernelbench(probs, cands)
        if not pairs:
            fail(f"no candidate in {candidates} matches a problem in {problems} (by file name or "
                 f"level/problem number), e.g. {cands[0].name}")
        if limit is not None:
            if limit < 1:
                fail(f"--limit: must be >= 1, got {limit}")
            pairs = dict(list(pairs.items())[:limit])
        dev = check_device(device)
        family = label or (candidates.name if candidates.is_dir() else candidates.stem)
        with clean_errors():
            previous = open_results(out, resume, overwrite)
            done = done_keys(previous)
            plan = RunPlan(pairs=[])
            for pp, cs in pairs.items():
                prob = load_or_record(pp, plan)
                if prob is None:
                    continue
                wls = [w for w in prob.workloads if workload_tags_match(prob, w, None, exclude_tag)]
                for c in cs:
                    cand = load_candidate(c, prob)
                    m = _SAMPLE_RX.search(c.stem)
                    cand.label = family + (f"/sample_{m.group(1)}" if m and len(cs) > 1 else "")
                    todo = [w for w in wls if (cand.solution_hash, w.uuid) not in done]
                    plan.pairs.append(PairPlan(problem=prob, candidate=cand, todo=todo,
                                               done=len(wls) - len(todo)))
        _announce(plan, len(pairs), dev, out, json_out,
                  f"{len(unmatched)} candidate files match no problem: "
                  + ", ".join(c.name for c in unmatched[:5]) + (" ..." if len(unmatched) > 5 else "")
                  if unmatched else "")
        run_and_report(plan, out, opt.on_device(settings, dev), previous, json_out=json_out)


def _announce(plan, n_problems: int, dev: str, out: Path, json_out: bool, note: str) -> None:
    if json_out:
        return
    console.print(
        f"{n_problems} problems, {len(plan.pairs)} problem x solution pairs, "
        f"{plan.todo_workloads} workloads to evaluate on {dev}"
        + (f", {plan.skipped_workloads} already in {out}" if plan.skipped_workloads else ""),
        highlight=False, markup=False)
    if note and (plan.problems_without_solutions or "match no problem" in note):
        console.print(note, style="yellow", highlight=False, markup=False)
