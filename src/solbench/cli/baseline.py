"""`solbench baseline PROBLEM... --compile|--eager [-o DIR]`: write baseline candidates (the
reference through torch.compile, or the reference itself as the eager candidate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console, err_console


def register(app: typer.Typer) -> None:
    @app.command("baseline")
    def baseline(
        problems: list[Path] = typer.Argument(..., help="problem dirs or KernelBench .py files"),
        compile_: bool = typer.Option(False, "--compile",
                                      help="wrap the reference in torch.compile"),
        eager: bool = typer.Option(False, "--eager",
                                   help="the reference itself, as the eager candidate"),
        out: Optional[Path] = typer.Option(
            None, "-o", "--out",
            help="output dir: DIR/solution.json for one problem, DIR/<problem>/solution.json "
                 "for several (default: ./baselines)"),
        backend: str = typer.Option("inductor", help="torch.compile backend "
                                    "(inductor; eager/aot_eager for CPU smoke tests)"),
        mode: Optional[str] = typer.Option(None, help="torch.compile mode"),
        json_out: bool = typer.Option(False, "--json", help="print {\"solutions\": \\[paths]}"),
    ) -> None:
        """Write a baseline candidate (solution.json) for each PROBLEM."""
        from ..spec import load_problem
        from ..suites import resolve_problem
        from ..suites.baseline import BACKENDS, MODES, compile_baseline, write_solution

        if compile_ == eager:
            err_console.print("[red]error:[/red] choose one baseline kind: --compile or --eager")
            raise typer.Exit(2)
        if backend not in BACKENDS:
            err_console.print(f"[red]error:[/red] --backend: {backend!r} not in {list(BACKENDS)}")
            raise typer.Exit(2)
        if mode not in MODES:
            err_console.print(f"[red]error:[/red] --mode: {mode!r} not in {list(MODES)[1:]}")
            raise typer.Exit(2)
        base = out or Path("baselines")
        written = []
        with clean_errors():
            loaded = [load_problem(resolve_problem(p)) for p in problems]
            for prob in loaded:
                if eager:
                    from ..spec import reference_solution

                    sol = reference_solution(prob)
                else:
                    sol = compile_baseline(prob, backend=backend, mode=mode)
                d = base if len(loaded) == 1 and out is not None else base / prob.name
                written.append(write_solution(sol, d))
        if json_out:
            print(json.dumps({"solutions": [str(p) for p in written]}))
        else:
            for p in written:
                console.print(f"wrote {p}", highlight=False)
