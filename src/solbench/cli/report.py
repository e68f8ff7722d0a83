"""`solbench report RESULTS... [-o DIR] [--format table|json|markdown]`: leaderboards per suite
and hardware, and a static HTML report with the figures (solbench.report.html)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console, err_console, escape_markup, fail

FORMATS = ("table", "json", "markdown")


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        results: list[Path] = typer.Argument(..., help="results JSONL files (solbench run / eval -o)"),
        out: Optional[Path] = typer.Option(None, "-o", "--out", help="write the HTML report to this folder"),
        fmt: str = typer.Option("table", "--format", help="terminal output: " + " | ".join(FORMATS)),
        include_unverified: bool = typer.Option(False, "--include-unverified",
                                                help="also use lines that fail authentication (marked)"),
        title: str = typer.Option("solbench report", "--title", help="title of the HTML report"),
        by_model: bool = typer.Option(False, "--by-model", help="the per-model table of a study "
                                      "(docs/study.md); with -o also models.csv/.parquet/.png"),
        verified: list[Path] = typer.Option([], "--verified", help="solbench verify records besides "
                                            "<results>.verify.jsonl (read by default)"),
        verified_only: bool = typer.Option(False, "--verified-only", help="the per-model table with fast_p "
                                           "counting verified speedups only (implies --by-model)"),
        label: list[str] = typer.Option([], "--label", help="only this candidate label (repeatable), "
                                        "e.g. --label eager --label compile"),
    ) -> None:
        """Leaderboards (candidates with a correct problem first, then by mean SOL score, or
        without one by correct problems and speedup), per-problem pages and figures."""
        from ..report.html import build_report, render_terminal
        from ..report.records import load, select_labels, why_no_accepted

        if fmt not in FORMATS:
            fail(f"--format: {fmt!r} not in {list(FORMATS)}")
        with clean_errors():
            try:
                rs = load(results, include_unverified=include_unverified)
                if label:
                    rs = select_labels(rs, label)
            except ValueError as e:  # a malformed typed block (store.blocks.BlockError)
                from ..errors import SolbenchError

                raise SolbenchError(str(e)) from None
        if not rs.rows:
            fail("no accepted traces in " + ", ".join(map(str, results)) + why_no_accepted(rs))
        if out is not None:
            data = build_report(rs, out, title=title)
            f = data["figures"]
            err_console.print(f"wrote {escape_markup(out / 'index.html')} ({len(rs.rows)} traces); speedup vs SOL distance "
                              f"r = {_r(f['speedup_vs_sol_distance']['pearson_r_log'])}, SOL score vs headroom "
                              f"r = {_r(f['score_vs_headroom']['pearson_r'])}", highlight=False)
        if by_model or verified_only:
            from .report_models import show_models

            show_models(rs, results, verified, verified_only, fmt, out)
            return
        rendered = render_terminal(rs, fmt)
        if isinstance(rendered, str):
            print(rendered)
        else:
            for t in rendered:
                console.print(t)


def _r(v) -> str:
    return "-" if v is None else f"{v:.3f}"
