"""`solbench suite list [--json]` and `solbench run SUITE|DIR --solutions DIR ...`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console, err_console, is_tty


def _fmt(v, pct: bool = False, digits: int = 3) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * v:.1f}%"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def _detect_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def register(app: typer.Typer) -> None:
    suite_app = typer.Typer(help="Bundled problem suites (l1, dlrm, ...).", no_args_is_help=True)
    app.add_typer(suite_app, name="suite")

    @suite_app.command("list")
    def suite_list(json_out: bool = typer.Option(False, "--json", help="strict JSON on stdout")):
        """List the bundled suites with their problem and workload counts."""
        from ..suites import list_suites

        suites = list_suites()
        if json_out:
            print(json.dumps({"suites": [
                {"name": s.name, "problems": s.problems, "workloads": s.workloads,
                 "cpu_workloads": s.cpu_workloads} for s in suites]}))
            return
        from rich.table import Table

        t = Table(title="solbench suites")
        for col in ("suite", "problems", "workloads", "cpu workloads", "path"):
            t.add_column(col)
        for s in suites:
            t.add_row(s.name, str(s.problems), str(s.workloads), str(s.cpu_workloads),
                      str(s.path))
        console.print(t)

    @app.command("run")
    def run_cmd(
        target: str = typer.Argument(..., help="a suite name (see `solbench suite list`), a "
                                               "problem dir, or a dir of problem dirs"),
        solutions: Path = typer.Option(..., "--solutions", "-s",
                                       help="DIR holding <problem name>/<candidate>.json|.py"),
        out: Path = typer.Option(Path("results.jsonl"), "-o", "--out",
                                 help="results file (trace JSON lines, appended)"),
        resume: bool = typer.Option(False, "--resume",
                                    help="skip (solution hash, workload uuid) pairs already "
                                         "in the results file"),
        overwrite: bool = typer.Option(False, "--overwrite",
                                       help="start a fresh results file"),
        device: str = typer.Option("auto", "--device", help="cuda, cpu or auto"),
        tag: list[str] = typer.Option([], "--tag",
                                      help="only workloads with this tag (repeatable), "
                                           "e.g. --tag cpu"),
        exclude_tag: list[str] = typer.Option([], "--exclude-tag",
                                              help="leave out workloads with this tag "
                                                   "(repeatable), e.g. --exclude-tag cpu on a GPU"),
        shard: Optional[str] = typer.Option(None, "--shard",
                                            help="I/N: only problems at positions i mod n "
                                                 "(one process per GPU)"),
        problem: list[str] = typer.Option([], "--problem",
                                          help="only problems whose name matches this glob "
                                               "(repeatable)"),
        max_workloads: Optional[int] = typer.Option(None, "--max-workloads",
                                                    help="first N workloads per problem"),
        unit: str = typer.Option("problem", "--unit",
                                 help="summary unit: problem (all workloads must pass; "
                                      "speedup = geomean over them) or workload"),
        iters: Optional[int] = typer.Option(None, "--iters",
                                            help="timed iterations per workload (harness "
                                                 "default when omitted)"),
        rounds: Optional[int] = typer.Option(None, "--rounds",
                                             help="correctness rounds per workload"),
        seed: Optional[str] = typer.Option(None, "--seed",
                                           help="base seed of the inputs (int or 0x-hex) to "
                                                "reproduce a run, e.g. the same verdicts on two "
                                                "executors; default a secret seed per evaluation"),
        json_out: bool = typer.Option(False, "--json", help="print the summary as JSON"),
        executor: str = typer.Option("local", "--executor",
                                     help="local (this process, the default) or ray (one "
                                          "worker per GPU of a Ray cluster; pip install "
                                          "'solbench[ray]')"),
        address: Optional[str] = typer.Option(None, "--address",
                                              help="Ray cluster address (--executor ray; "
                                                   "default: a new local cluster)"),
        workers: Optional[int] = typer.Option(None, "--workers",
                                              help="Ray workers (--executor ray; default: "
                                                   "every GPU of the cluster, on the CPU half "
                                                   "its CPUs)"),
    ) -> None:
        """Evaluate every problem x solution pair; append traces; print a summary."""
        import fnmatch

        from ..report.summary import summarize, unit_results
        from ..suites import resolve_suite_or_dir
        from ..suites.runner import done_keys, label_map, plan_run, read_results, result_key

        from ..suites.executors import make_executor

        try:
            ex = make_executor(executor, address=address, workers=workers)
        except ValueError as e:
            err_console.print(f"[red]error:[/red] --executor: {e}")
            raise typer.Exit(2)
        if workers is not None and workers < 1:
            err_console.print(f"[red]error:[/red] --workers: {workers} is not >= 1")
            raise typer.Exit(2)
        if unit not in ("problem", "workload"):
            err_console.print(f"[red]error:[/red] --unit: {unit!r} is not problem or workload")
            raise typer.Exit(2)
        shard_t = None
        if shard is not None:
            try:
                i_s, n_s = (int(x) for x in shard.split("/"))
                if not (n_s >= 1 and 0 <= i_s < n_s):
                    raise ValueError
                shard_t = (i_s, n_s)
            except ValueError:
                err_console.print(f"[red]error:[/red] --shard: {shard!r} is not I/N with 0 <= I < N")
                raise typer.Exit(2)
        dev = _detect_device(device)
        if dev not in ("cpu", "cuda") and not dev.startswith("cuda:"):
            err_console.print(f"[red]error:[/red] --device: {device!r} is not cuda, cpu or auto")
            raise typer.Exit(2)
        with clean_errors():
            paths = resolve_suite_or_dir(target)
            if problem:
                paths = [p for p in paths
                         if any(fnmatch.fnmatch(p.name, g) or fnmatch.fnmatch(p.stem, g)
                                for g in problem)]
            if out.exists() and out.stat().st_size > 0 and not (resume or overwrite):
                err_console.print(f"[red]error:[/red] {out}: results file exists; pass --resume "
                                  "to continue it or --overwrite to start afresh")
                raise typer.Exit(2)
            if overwrite and out.exists():
                out.unlink()
            previous = read_results(out) if resume else []
            plan = plan_run(paths, solutions, done_keys(previous), tags=tag or None,
                            workload_limit=max_workloads, exclude_tags=exclude_tag or None,
                            shard=shard_t)

        if not plan.pairs:
            # nothing matched: say what was expected where, and fail (a run that evaluates
            # nothing must not look like a clean one)
            found = sorted(p.name for p in Path(solutions).iterdir())[:8] if Path(solutions).is_dir() else []
            err_console.print(
                f"error: {solutions}: no candidate for any of the {len(paths)} problems; expected "
                f"{solutions}/<problem>/<label>.json|.py (e.g. {solutions}/{paths[0].name}/eager.json)"
                + (f"; found {found}" if found else "; the directory is empty"),
                highlight=False, markup=False)
            raise typer.Exit(2)
        from .evaluate import _parse_seed

        opts = {k: v for k, v in (("iters", iters), ("rounds", rounds), ("seed", _parse_seed(seed)))
                if v is not None}
        quiet = json_out or not is_tty()
        if not json_out:
            console.print(
                f"{len(paths)} problems, {len(plan.pairs)} problem x solution pairs, "
                f"{plan.todo_workloads} workloads to evaluate on {dev}"
                + (f", {plan.skipped_workloads} already in {out}" if plan.skipped_workloads else ""),
                highlight=False)
            if plan.problems_without_solutions:
                console.print(f"[yellow]{len(plan.problems_without_solutions)} problems have no "
                              f"solution in {solutions}[/yellow]", highlight=False)

        if quiet:
            outcome = _run_with(ex, plan, out, dev, opts, None)
        else:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), TimeRemainingColumn(), console=console) as prog:
                task = prog.add_task("evaluating", total=max(plan.todo_workloads, 1))

                def done(pair, traces):
                    prog.update(task, advance=len(pair.todo),
                                description=f"{pair.problem.name[:28]} / {pair.candidate.label}")

                outcome = _run_with(ex, plan, out, dev, opts, done)

        # summary over this plan's pairs: the traces written now plus resumed ones
        wanted = {(p.candidate.solution_hash, w.uuid) for p in plan.pairs
                  for w in p.problem.workloads}
        # from what this process holds (read before any candidate ran, plus what it evaluated),
        # never from the file again: a candidate can write to the file (same user)
        traces = [t for t in list(previous) + list(outcome.traces) if result_key(t) in wanted]
        labels = label_map(plan)

        def label_of(t):
            return labels.get(t.evaluation.solution_hash or "", t.solution)

        summaries = summarize(traces, unit=unit, label_of=label_of)
        rows = unit_results(traces, unit="problem", label_of=label_of)
        if json_out:
            print(json.dumps({
                "results": str(out), "device": dev, "unit": unit,
                "evaluated_now": len(outcome.traces), "harness_errors": outcome.harness_errors,
                "summary": {k: s.to_json() for k, s in summaries.items()},
                "problems": [r.__dict__ for r in sorted(rows, key=lambda r: (r.definition, r.label))],
            }, allow_nan=False))
        else:
            _print_tables(summaries, rows)
            for e in outcome.harness_errors:
                err_console.print(f"[red]harness error:[/red] {e}", highlight=False)
        if outcome.harness_errors:
            raise typer.Exit(1)


def _run_with(ex, plan, out, dev, opts, done):
    """Run ``plan`` on executor ``ex``; a Ray that is missing or fails to start is one line."""
    try:
        return ex.run(plan, out, dev, eval_options=opts, on_pair_done=done)
    except RuntimeError as e:
        if ex.name != "ray":
            raise
        err_console.print(f"[red]error:[/red] --executor ray: {e}", highlight=False)
        raise typer.Exit(2)


def _print_tables(summaries, rows) -> None:
    from rich.table import Table

    t = Table(title="per problem")
    for col in ("problem", "candidate", "passed", "speedup (geomean)", "SOL score", "statuses"):
        t.add_column(col)
    for r in sorted(rows, key=lambda r: (r.definition, r.label)):
        st = ", ".join(f"{k}:{v}" for k, v in sorted(r.statuses.items()) if k != "PASSED")
        t.add_row(r.definition, r.label, f"{r.passed}/{r.workloads}", _fmt(r.speedup),
                  _fmt(r.sol_score), st or "")
    console.print(t)
    s = Table(title="summary (unit: %s)" % next(iter(summaries.values())).unit
              if summaries else "summary")
    cols = ("candidate", "units", "correct", "win rate", "median speedup", "geomean speedup",
            "fast_0", "fast_1", "fast_1.5", "fast_2", "mean SOL score")
    for col in cols:
        s.add_column(col)
    for lab, x in summaries.items():
        s.add_row(lab, str(x.units), _fmt(x.correct_rate, pct=True), _fmt(x.win_rate, pct=True),
                  _fmt(x.median_speedup), _fmt(x.geomean_speedup),
                  *(_fmt(x.fast_p.get(k), pct=True) for k in ("0", "1", "1.5", "2")),
                  _fmt(x.mean_sol_score) + (f" (n={x.sol_units})" if x.sol_units else ""))
    console.print(s)
