"""`solbench baseline PROBLEM... --compile|--eager [-o DIR]`: write baseline candidates (the
reference through torch.compile, or the reference itself as the eager candidate) in the
layout `solbench run --solutions DIR` takes: ``DIR/<problem>/<label>.json``, the label being
the one name every command gives that baseline (``eager``, ``compile``; see
``solbench.report.records.canonical_label``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console, fail, resolve_problem_arg


def baseline_label(eager: bool, backend: str = "inductor", mode: str | None = None) -> str:
    """``eager``; ``compile`` for the default torch.compile (inductor, default mode),
    ``compile_<backend>[_<mode>]`` otherwise: each kind of baseline its own label, which
    ``run``, ``report`` and ``compare`` all show."""
    if eager:
        return "eager"
    return "_".join(["compile"] + ([backend] if backend != "inductor" else []) + ([mode] if mode else []))


def baseline_filename(eager: bool, backend: str = "inductor", mode: str | None = None) -> str:
    """``<label>.json`` (:func:`baseline_label`): ``solbench run`` labels a candidate by its
    file name."""
    return baseline_label(eager, backend, mode) + ".json"


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
            help="solutions dir (default ./baselines): writes DIR/<problem>/eager.json or "
                 "DIR/<problem>/compile[_<backend>][_<mode>].json, the layout `solbench run "
                 "--solutions DIR` takes; run, report and compare label them eager and compile"),
        backend: str = typer.Option("inductor", help="torch.compile backend "
                                    "(inductor; eager/aot_eager for CPU smoke tests)"),
        mode: Optional[str] = typer.Option(None, help="torch.compile mode"),
        json_out: bool = typer.Option(False, "--json", help="print {\"solutions\": [paths]}"),
    ) -> None:
        """Write a baseline candidate for each PROBLEM as DIR/<problem>/eager.json (--eager) or
        DIR/<problem>/compile.json (--compile), ready for `solbench run --solutions DIR`."""
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
                d = base / prob.name
                written.append(write_solution(sol, d, baseline_filename(eager, backend, mode)))
        if json_out:
            print(json.dumps({"solutions": [str(p) for p in written]}))
        else:
            for p in written:
                console.print(f"wrote {p}", highlight=False, markup=False)
