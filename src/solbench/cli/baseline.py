"""`solbench baseline PROBLEM... --compile|--eager [-o DIR]`: write baseline candidates (the
reference through torch.compile, or the reference itself as the eager candidate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console, fail, resolve_problem_arg


def baseline_filename(eager: bool, backend: str = "inductor", mode: str | None = None) -> str:
    """``solution_eager.json``; ``solution_compile.json`` for the default torch.compile
    (inductor, default mode), ``solution_compile_<backend>[_<mode>].json`` otherwise: each
    kind of baseline its own file, labelled by ``solbench run`` as what follows ``solution_``."""
    if eager:
        return "solution_eager.json"
    parts = ["compile"] + ([backend] if backend != "inductor" else []) + ([mode] if mode else [])
    return "solution_" + "_".join(parts) + ".json"


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
            help="output dir: DIR/<file> for one problem, DIR/<problem>/<file> for several "
                 "(default: ./baselines/<problem>/<file>); <file> is solution_eager.json or "
                 "solution_compile[_<backend>][_<mode>].json, so `solbench run --solutions DIR` "
                 "labels them eager and compile"),
        backend: str = typer.Option("inductor", help="torch.compile backend "
                                    "(inductor; eager/aot_eager for CPU smoke tests)"),
        mode: Optional[str] = typer.Option(None, help="torch.compile mode"),
        json_out: bool = typer.Option(False, "--json", help="print {\"solutions\": \\[paths]}"),
    ) -> None:
        """Write a baseline candidate for each PROBLEM: solution_eager.json (--eager) or
        solution_compile.json (--compile), side by side in the problem's folder."""
        from ..spec import load_problem
        from ..suites.baseline import BACKENDS, MODES, compile_baseline, write_solution

        if compile_ == eager:
            fail("choose one baseline kind: --compile or --eager")
        if backend not in BACKENDS:
            fail(f"--backend: {backend!r} not in {list(BACKENDS)}")
        if mode not in MODES:
            fail(f"--mode: {mode!r} not in {list(MODES)[1:]}")
        base = out or Path("baselines")
        written = []
        with clean_errors():
            loaded = [load_problem(resolve_problem_arg(p)) for p in problems]
            for prob in loaded:
                if eager:
                    from ..spec import reference_solution

                    sol = reference_solution(prob)
                else:
                    sol = compile_baseline(prob, backend=backend, mode=mode)
                d = base if len(loaded) == 1 and out is not None else base / prob.name
                written.append(write_solution(sol, d, baseline_filename(eager, backend, mode)))
        if json_out:
            print(json.dumps({"solutions": [str(p) for p in written]}))
        else:
            for p in written:
                console.print(f"wrote {p}", highlight=False)
