"""``solbench selftest``: A/A, known-difference and fresh-vs-reused-worker checks of the
measurement (see :mod:`solbench.selftest`)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import List, Optional

import typer

from . import options as opt
from .common import (escape_markup, LIMIT_HELP, MAX_BYTES_HELP, check_device, check_output, choose_workloads,
                     clean_errors, console, err_console, fail, parse_bytes)


def register(app: typer.Typer) -> None:
    @app.command("selftest")
    def selftest_cmd(
        paths: Optional[List[Path]] = typer.Argument(None, help="problem directories, folders of "
                                                                "problems or KernelBench .py files "
                                                                "(default: the built-in set)"),
        suite: Optional[List[str]] = typer.Option(None, "--suite", help="a bundled suite (l1, dlrm); repeatable"),
        device: opt.Device = None,
        iters: opt.Iters = None,
        rounds: int = typer.Option(2, "--rounds", help="correctness rounds per evaluation (timing is what is checked)"),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help=LIMIT_HELP + " (per problem)"),
        max_bytes: Optional[str] = typer.Option(None, "--max-bytes", help=MAX_BYTES_HELP),
        cpu_only: bool = typer.Option(False, "--cpu-tagged", help="only workloads tagged cpu (CI-sized)"),
        out: Optional[Path] = typer.Option(None, "--out", help="write the report as JSON here"),
        as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress lines"),
    ) -> None:
        """Check the measurement itself: the reference as candidate reads 1.00x within the
        run's stated noise (A/A, p5/p50/p95 per suite); the reference plus a second pass of
        the same work reads a slowdown of about 2x; a workload in a fresh worker and in a
        reused one agree. Exit 1 when a check fails, 3 when a suite is inconclusive (no
        workload's A/A noise interval narrow enough to test anything), 0 when all passed."""
        if iters is not None and iters < 4:
            fail(f"--iters: must be >= 4 (two blocks per side, quartiles of each), got {iters}")
        if limit is not None and limit < 1:
            fail(f"--limit: must be >= 1, got {limit}")
        settings = opt.eval_config(rounds=rounds, iters=iters)
        mb = parse_bytes(max_bytes)
        check_output(out, "--out")
        dev = check_device(device)

        from . import lifetime
        from ..selftest import EXIT_CODES, run_selftest, write_builtin
        from ..spec import load_problem
        from ..suites import resolve_suite_or_dir, suite_problems

        with clean_errors(), tempfile.TemporaryDirectory(prefix="solbench-selftest-") as tmp:
            chosen: list[tuple[str, Path]] = []
            for name in suite or []:
                chosen += [(name, p) for p in suite_problems(name)]
            for p in paths or []:
                found = resolve_suite_or_dir(p)
                # a folder of problems is a suite of its own; single problems form one group
                label = Path(p).name if len(found) > 1 else "paths"
                chosen += [(label, x) for x in found]
            if not chosen:
                chosen = [("builtin", p) for p in write_builtin(Path(tmp))]
            problems = []
            for name, p in chosen:
                prob = load_problem(p)
                pool = [w for w in prob.workloads if "cpu" in (w.tags or [])] if cpu_only else None
                if cpu_only and not pool:
                    continue
                problems.append((name, prob, choose_workloads(prob, None, limit, mb, pool=pool)))
            if not problems:
                fail("no workload selected (--cpu-tagged left none)")
            cfg = opt.on_device(settings, dev)
            lifetime.arm_watchdog()

            def say(msg: str) -> None:
                if not quiet:
                    err_console.print(msg, highlight=False, markup=False)

            report = run_selftest(problems, cfg, progress=say)
        data = report.to_json()
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
        if as_json:
            typer.echo(json.dumps(data, allow_nan=False))
        else:
            _print(report)
        raise typer.Exit(EXIT_CODES[report.outcome])


def _print(report) -> None:
    from ..report.markup import TextTable as Table

    from ..selftest import AA_MAX_WIDTH, KD_EXPECTED, _fmt, _fmt_iv

    t = Table(title=f"selftest per workload ({report.device}, {report.iters} timed iterations)")
    for col in ("problem", "workload", "A/A speedup", "noise interval", "ref ms",
                "known diff. slowdown", "fresh / reused worker", "findings"):
        t.add_column(col, overflow="fold")
    for r in report.rows:
        aa = "-" if r.aa_speedup is None else f"{r.aa_speedup:.3f}x" + (" ~" if r.aa_within_noise else " OUT") \
            + ("" if r.aa_conclusive else " (too noisy)")
        if r.aa_speedup is None:
            aa = r.aa_status
        if r.kd_status is None:
            kd = "-"
        elif r.kd_speedup is None:
            kd = r.kd_status
        else:
            kd = (f"{1 / r.kd_speedup:.2f}x {_fmt_iv(r.kd_interval, inv=True)} "
                  + ("ok" if r.kd_ok else "FAIL") + ("" if r.kd_resolvable else " (unresolved)"))
        ag = "-" if r.agree is None else (f"{_fmt(r.fresh_ms, '.4g')} / {_fmt(r.reused_ms, '.4g')} ms, A/A "
                                          f"{_fmt(r.fresh_speedup)} / {_fmt(r.reused_speedup)} "
                                          + ("ok" if r.agree else "FAIL"))
        t.add_row(r.problem, r.workload, aa, _fmt_iv(r.aa_interval), _fmt(r.ref_ms, ".4g"),
                  kd, ag, ", ".join(r.findings))
    t.caption = (f"~ : the A/A speedup lies within the run's noise (speedup interval from the two "
                 f"latency interquartile ranges holds 1.0); too noisy: its interval spans more than "
                 f"{AA_MAX_WIDTH:g}x and tests nothing; known difference expected {KD_EXPECTED:.0f}x "
                 "(unresolved: below the resolvable floor or inside the run's noise; the expected band then only has to lie within the noise)")
    console.print(t)
    s = Table(title="A/A distribution per suite (speedup of the reference against itself)")
    for col in ("suite", "workloads", "p5", "p50", "p95", "within noise", "conclusive", "geomean interval",
                "A/A", "known difference", "fresh vs reused", "result"):
        s.add_column(col)
    for x in report.suites:
        s.add_row(x.suite, str(x.n), _fmt(x.p5, ".3f"), _fmt(x.p50, ".3f"), _fmt(x.p95, ".3f"),
                  f"{x.within_noise}/{x.n}", f"{x.conclusive}/{x.n}", _fmt_iv(x.geomean_interval), "ok" if x.aa_ok else "FAIL",
                  f"{x.kd_ok}/{x.kd_n}", f"{x.agree_ok}/{x.agree_n}", x.result.upper())
    console.print(s)
    for f in report.failures:
        console.print(f"[red]FAIL[/red] {escape_markup(f)}", highlight=False)
    for f in report.inconclusive:
        console.print(f"[yellow]INCONCLUSIVE[/yellow] {escape_markup(f)}", highlight=False)
    if report.outcome == "fail":
        console.print(f"{len(report.failures)} check(s) failed", highlight=False)
    elif report.outcome == "inconclusive":
        console.print("INCONCLUSIVE: no check failed, but the A/A of "
                      f"{len(report.inconclusive)} suite(s) tested nothing (too noisy); not a pass",
                      highlight=False)
    else:
        console.print("all checks passed", highlight=False)
