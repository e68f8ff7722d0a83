"""`solbench suite list [--json]` and `solbench run SUITE|DIR --solutions DIR ...`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from .. import paths
from ..config import DEFAULTS
from . import options as opt
from .common import (EvalProgress, check_device, choose_workloads, clean_errors, console,
                     err_console, fail, parse_bytes)

if TYPE_CHECKING:  # pragma: no cover
    from ..config import EvalConfig


def _fmt(v, pct: bool = False, digits: int = 3) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * v:.1f}%"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


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
                {"name": s.name, "path": str(s.path), "problems": s.problems,
                 "workloads": s.workloads, "cpu_workloads": s.cpu_workloads} for s in suites]}))
            return
        from ..report.markup import TextTable as Table

        t = Table(title="solbench suites")
        for col in ("suite", "problems", "workloads", "cpu workloads", "path"):
            t.add_column(col)
        for s in suites:
            t.add_row(s.name, str(s.problems), str(s.workloads), str(s.cpu_workloads),
                      str(s.path))
        console.print(t)

    @suite_app.command("show")
    def suite_show(name: str = typer.Argument(..., help="suite name (see `solbench suite list`)"),
                   json_out: bool = typer.Option(False, "--json", help="strict JSON on stdout")):
        """List the problems of one suite: name, workloads (cpu-tagged), op type, path."""
        from ..suites import list_suites

        suites = {s.name: s for s in list_suites()}
        if name not in suites:
            fail(f"no suite {name!r} (bundled: {', '.join(sorted(suites))})")
        info = suites[name]
        rows = []
        for d in sorted(p for p in info.path.iterdir() if (p / "definition.json").is_file()):
            try:
                defn = json.loads((d / "definition.json").read_text())
            except ValueError:
                defn = {}
            lines = [x for x in (d / "workload.jsonl").read_text().splitlines() if x.strip()] \
                if (d / "workload.jsonl").is_file() else []
            cpu = sum('"cpu"' in x for x in lines)
            rows.append({"name": d.name, "op_type": defn.get("op_type"), "workloads": len(lines),
                         "cpu_workloads": cpu, "path": str(d)})
        if json_out:
            print(json.dumps({"suite": name, "path": str(info.path), "problems": rows}))
            return
        from ..report.markup import TextTable as Table

        t = Table(title=f"suite {name}: {len(rows)} problems ({info.path})")
        for col in ("problem", "op type", "workloads", "cpu workloads"):
            t.add_column(col, overflow="fold")
        for r in rows:
            t.add_row(r["name"], str(r["op_type"] or "-"), str(r["workloads"]), str(r["cpu_workloads"]))
        console.print(t)

    @app.command("run")
    def run_cmd(
        target: str = typer.Argument(..., help="a suite name (see `solbench suite list`), a "
                                               "problem dir, or a dir of problem dirs"),
        solutions: Path = typer.Option(..., "--solutions", "-s",
                                       help="DIR holding <problem name>/<candidate>.json|.py"),
        out: Path = typer.Option(paths.DEFAULT_RESULTS, "-o", "--out",
                                 help="results file (trace JSON lines, appended)"),
        resume: bool = typer.Option(False, "--resume",
                                    help="skip (solution hash, workload uuid) pairs already "
                                         "in the results file"),
        overwrite: bool = typer.Option(False, "--overwrite",
                                       help="start a fresh results file"),
        device: opt.Device = None,
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
        workloads: opt.RunWorkloads = None,
        limit: opt.RunLimit = None,
        max_bytes: opt.MaxBytes = None,
        max_workloads: Optional[int] = typer.Option(None, "--max-workloads",
                                                    help="the first N workloads per problem, in "
                                                         "file order (after the tag filters)"),
        unit: str = typer.Option("problem", "--unit",
                                 help="summary unit: problem (all workloads must pass; "
                                      "speedup = geomean over them) or workload"),
        iters: opt.Iters = None,
        rounds: opt.Rounds = DEFAULTS.rounds,
        seed: opt.Seed = None,
        json_out: bool = typer.Option(False, "--json", help="print the summary as JSON"),
        timeout: opt.Timeout = None,
        build_timeout: opt.BuildTimeout = None,
        keep_going: opt.KeepGoing = False,
        spare_workers: opt.SpareWorkers = None,
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

        from ..suites import resolve_suite_or_dir
        from ..run.plan import done_keys, plan_run

        from ..run.executors import make_executor

        settings = opt.eval_config(rounds=rounds, iters=iters, seed=seed, timeout=timeout,
                                   build_timeout=build_timeout, keep_going=keep_going,
                                   spare_workers=spare_workers)

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
        mb = parse_bytes(max_bytes)
        if limit is not None and limit < 1:
            fail(f"--limit: must be >= 1, got {limit}")
        if not Path(solutions).is_dir():
            fail(f"--solutions: {solutions}: no such directory")
        dev = check_device(device)

        def select(prob, wls):
            if workloads is None and limit is None and mb is None:
                return wls
            return choose_workloads(prob, workloads, limit, mb, pool=wls)

        with clean_errors():
            paths = resolve_suite_or_dir(target)
            if problem:
                paths = [p for p in paths
                         if any(fnmatch.fnmatch(p.name, g) or fnmatch.fnmatch(p.stem, g)
                                for g in problem)]
            previous = open_results(out, resume, overwrite)
            plan = plan_run(paths, solutions, done_keys(previous), tags=tag or None,
                            workload_limit=max_workloads, exclude_tags=exclude_tag or None,
                            shard=shard_t, select=select)

        if not plan.pairs:
            # nothing matched: say what was expected where, and fail (a run that evaluates
            # nothing must not look like a clean one)
            for path, why in plan.invalid_problems:
                err_console.print(f"invalid problem, left out: {path}: {why}", highlight=False, markup=False)
            found = sorted(p.name for p in Path(solutions).iterdir())[:8] if Path(solutions).is_dir() else []
            err_console.print(
                f"error: {solutions}: no candidate for any of the {len(paths)} problems; expected "
                f"{solutions}/<problem>/<label>.json|.py (e.g. {solutions}/{paths[0].name}/eager.json)"
                + (f"; found {found}" if found else "; the directory is empty"),
                highlight=False, markup=False)
            raise typer.Exit(2)
        if not json_out:
            console.print(
                f"{len(paths)} problems, {len(plan.pairs)} problem x solution pairs, "
                f"{plan.todo_workloads} workloads to evaluate on {dev}"
                + (f", {plan.skipped_workloads} already in {out}" if plan.skipped_workloads else ""),
                highlight=False, markup=False)
            if plan.problems_without_solutions:
                console.print(f"{len(plan.problems_without_solutions)} problems have no "
                              f"solution in {solutions}", style="yellow", highlight=False, markup=False)
        run_and_report(plan, out, opt.on_device(settings, dev), previous, unit=unit,
                       json_out=json_out, executor=ex)


def open_results(out: Path, resume: bool, overwrite: bool) -> list:
    """The traces already in ``out`` (with --resume), after refusing to append to an existing
    file without --resume or --overwrite (exit 2)."""
    from ..run.plan import read_results

    if out.exists() and out.stat().st_size > 0 and not (resume or overwrite):
        fail(f"{out}: results file exists; pass --resume to continue it or --overwrite to "
             "start afresh")
    if overwrite and out.exists():
        out.unlink()
    return read_results(out) if resume else []


def run_and_report(plan, out: Path, cfg: "EvalConfig", previous: list, *, unit: str = "problem",
                   json_out: bool = False, executor=None) -> None:
    """Evaluate ``plan`` with the settings ``cfg`` (on ``cfg.device``; traces appended to
    ``out`` as each workload finishes, progress with ETA on stderr), then print the
    per-problem table and the summary (or JSON). Exit 1 when the harness itself failed on a
    pair. ``executor``: a :mod:`solbench.run.executors` executor (default: local, in this
    process)."""
    from ..report.summary import summarize, unit_results
    from ..run.executors import LocalExecutor
    from ..suites.runner import label_map
    from ..run.plan import result_key
    from ..run.plan import device_notes
    from . import lifetime

    dev = cfg.device

    # said before anything runs: problems left out (did not load) and problems that cannot
    # run on this device (recorded NOT_RUNNABLE without spending their inputs on them)
    for path, why in plan.invalid_problems:
        err_console.print(f"invalid problem, left out: {path}: {why}", highlight=False, markup=False)
    for line in device_notes(plan, dev):
        err_console.print(line, highlight=False, markup=False)
    lifetime.arm_watchdog()
    with EvalProgress(plan.todo_workloads, "run", enabled=not json_out) as prog:
        def on_trace(pair, t):
            prog.done(t, f"{pair.problem.name} / {pair.candidate.label}")

        outcome = _run_with(executor or LocalExecutor(), plan, out, cfg, on_trace)

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
            "invalid_problems": [{"path": p, "reason": r} for p, r in plan.invalid_problems],
            "summary": {k: s.to_json() for k, s in summaries.items()},
            "problems": [r.__dict__ for r in sorted(rows, key=lambda r: (r.definition, r.label))],
        }, allow_nan=False))
    else:
        _print_tables(summaries, rows, traces, label_of)
        for e in outcome.harness_errors:
            err_console.print(f"harness error: {e}", highlight=False, markup=False)
    if outcome.harness_errors:
        raise typer.Exit(1)


def _run_with(ex, plan, out, cfg, on_trace):
    """Run ``plan`` on executor ``ex``; a Ray that is missing or fails to start is one line."""
    try:
        return ex.run(plan, out, cfg.device, config=cfg, on_trace=on_trace)
    except RuntimeError as e:
        if ex.name != "ray":
            raise
        err_console.print(f"[red]error:[/red] --executor ray: {e}", highlight=False)
        raise typer.Exit(2)


def _print_tables(summaries, rows, traces=(), label_of=None) -> None:
    from collections import defaultdict

    from ..report.markup import TextTable as Table

    from ..report.tables import NOISE_LEGEND, geomean_interval_text, timing_unstable, within_noise

    groups: dict = defaultdict(list)
    for t in traces:
        groups[(t.definition, (label_of or (lambda x: x.solution))(t))].append(t)
    t = Table(title="per problem")
    for col in ("problem", "candidate", "passed", "speedup (geomean)", "SOL score", "statuses", "why"):
        t.add_column(col, overflow="fold")
    marked = False
    for r in sorted(rows, key=lambda r: (r.definition, r.label)):
        st = ", ".join(f"{k}:{v}" for k, v in sorted(r.statuses.items()) if k != "PASSED")
        sp = geomean_interval_text(groups.get((r.definition, r.label), []), r.speedup)
        marked = marked or sp.endswith(("~", "!"))
        # where the score would be, why there is none (as `solbench report` prints it)
        t.add_row(r.definition, r.label, f"{r.passed}/{r.workloads}", sp,
                  _fmt(r.sol_score) if r.sol_score is not None or not r.no_sol_score else r.no_sol_score,
                  st or "", _short(r.reason))
    if marked:
        t.caption = NOISE_LEGEND
    console.print(t)
    s = Table(title="summary (unit: %s)" % next(iter(summaries.values())).unit
              if summaries else "summary")
    cols = ("candidate", "units", "correct", "win rate", "median speedup", "geomean speedup",
            "fast_0", "fast_1", "fast_1.5", "fast_2", "in noise", "mean SOL score", "~ / !")
    width = max([len(str(lab)) for lab in summaries] + [9])
    for col in cols:
        # nothing cut: a long label keeps its width, the figures fold
        s.add_column(col, overflow="fold", min_width=width if col == "candidate" else None)
    by_label: dict = defaultdict(list)
    for (_, lab), ts in groups.items():
        by_label[lab].extend(ts)
    for lab, x in summaries.items():
        s.add_row(lab, str(x.units), _fmt(x.correct_rate, pct=True), _fmt(x.win_rate, pct=True),
                  _fmt(x.median_speedup), geomean_interval_text(by_label.get(lab, []), x.geomean_speedup),
                  *(_fmt(x.fast_p.get(k), pct=True) for k in ("0", "1", "1.5", "2")),
                  str(x.fast_p_left_out.get("1", 0)),
                  _fmt(x.mean_sol_score) + (f" (n={x.sol_units})" if x.sol_units else ""),
                  _noise_cell(by_label.get(lab, []), within_noise, timing_unstable))
    s.caption = ("fast_0 = correct share; fast_p (p > 0) counts a speedup above p only when the low end "
                 "of its noise interval (reference Q1 / candidate Q3) is above p too; 'in noise' = "
                 "correct units faster than 1 by their medians but left out of fast_1 and the win rate; "
                 "~ / ! = speedups within the run's noise / timed on an unquiet machine, of those timed")
    console.print(s)


def _short(reason: str, n: int = 200) -> str:
    """A failure reason for a table cell: its first line, at most ``n`` characters."""
    line = reason.strip().splitlines()[0] if reason.strip() else ""
    return line if len(line) <= n else line[: n - 3] + "..."


def _noise_cell(traces, within_noise, timing_unstable) -> str:
    """How many of a candidate's speedups the run cannot tell from 1.0 (``~``) or timed on
    an unquiet machine (``!``), of those with a speedup: its fast_p figures and median say
    nothing about those (issue 13: the eager baseline read a median 2.05x on the CPU)."""
    timed = [t for t in traces if t.evaluation.performance is not None
             and t.evaluation.performance.speedup_factor is not None]
    if not timed:
        return "-"
    return (f"{sum(within_noise(t) for t in timed)} ~ / {sum(timing_unstable(t) for t in timed)} ! "
            f"of {len(timed)}")
