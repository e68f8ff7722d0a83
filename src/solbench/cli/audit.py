"""`solbench audit PROBLEM [--json]`: the trivial-candidate screen of a problem, and
`solbench audit --solution SOL [PROBLEM]`: the static audit of a candidate's sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import (escape_markup, styled, LIMIT_HELP, WORKLOADS_HELP, check_device, check_file, choose_workloads,
                     clean_errors, console, err_console, fail, parse_bytes, resolve_problem_arg)


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def register(app: typer.Typer) -> None:
    @app.command("audit")
    def audit_cmd(
        problem: Optional[Path] = typer.Argument(
            None, help="problem dir or KernelBench .py (with --solution: optional, gives the "
                       "declared dtypes for the precision rules)"),
        solution: Optional[Path] = typer.Option(
            None, "--solution", "-s", help="show the static audit of this candidate "
                                           "(solution.json or candidate .py) instead"),
        json_out: bool = typer.Option(False, "--json", help="strict JSON on stdout"),
        device: str = typer.Option("cpu", "--device", help="cpu, cuda or auto"),
        workloads: Optional[str] = typer.Option(None, "--workloads", "-w", help=WORKLOADS_HELP),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help=LIMIT_HELP),
        cpu_only: bool = typer.Option(False, "--cpu-only",
                                      help="only workloads tagged 'cpu' (when any are)"),
        seed: int = typer.Option(0, "--seed", help="input seed"),
        max_bytes: Optional[str] = typer.Option(
            None, "--max-bytes", help="skip (and record) workloads declaring more input+output "
                                      "bytes, e.g. 1e9, 512M (default 1G on CPU, none on CUDA)"),
        no_downgrade: bool = typer.Option(False, "--no-downgrade",
                                          help="skip the bf16/fp16 reference runs"),
        no_stress: bool = typer.Option(False, "--no-stress",
                                       help="skip judging the reference on the stress rounds' inputs"),
        fail_on_degenerate: bool = typer.Option(
            False, "--fail-on-degenerate", help="exit 1 when the problem is degenerate"),
    ):
        """Screen PROBLEM with trivial candidates (zeros, a tiny constant, the reference's
        mean, inputs passed through) in upstream and solbench modes, plus the reduced-precision
        reference, and list the stress rounds the reference itself fails; or, with
        --solution, list the static audit's advisory findings."""
        mb = parse_bytes(max_bytes)
        if limit is not None and limit < 1:
            fail(f"--limit: must be >= 1, got {limit}")
        if device not in ("auto",):
            check_device(device)
        check_file(solution, "--solution")
        if problem is not None:
            resolve_problem_arg(problem)
        from ..spec import load_problem, load_solution
        from ..suites import resolve_problem

        with clean_errors():
            from ..errors import SpecError

            if solution is not None:
                if not solution.exists():
                    raise SpecError(solution, "", "no such solution file")
                prob = load_problem(resolve_problem(problem)) if problem is not None else None
                sol = load_solution(solution, prob)
                from ..integrity.static_audit import audit_solution

                findings = audit_solution(sol, prob.definition if prob else None)
                if json_out:
                    print(json.dumps({"solution": sol.name,
                                      "findings": [f.model_dump(mode="json") for f in findings]}))
                    return
                _print_findings(sol.name, findings)
                return
            if problem is None:
                err_console.print("[red]error:[/red] give a PROBLEM (or --solution SOL)")
                raise typer.Exit(2)
            prob = load_problem(resolve_problem(problem))
            wl_arg = None
            if workloads is not None or limit is not None:
                wl_arg = choose_workloads(prob, workloads, limit)
            from ..integrity.screen import screen_problem

            res = screen_problem(prob, device=_device(device), workloads=wl_arg,
                                 seed=seed, cpu_tagged_only=cpu_only, max_bytes=mb,
                                 downgrade=not no_downgrade, stress=not no_stress)
        if json_out:
            print(json.dumps(res.to_json(), allow_nan=False))
        else:
            _print_screen(res)
        if fail_on_degenerate and res.degenerate:
            raise typer.Exit(1)


def _print_findings(name: str, findings) -> None:
    from ..report.markup import TextTable as Table

    if not findings:
        console.print(f"{name}: no static-audit findings", style="green", markup=False)
        return
    t = Table(title=f"static audit of {name} (advisory)")
    for col in ("rule", "file:line", "snippet", "message"):
        t.add_column(col, overflow="fold")
    for f in findings:
        ev = f.evidence
        t.add_row(f.check, f"{ev.get('file')}:{ev.get('line')}", ev.get("snippet", ""), f.message)
    console.print(t)


def _print_screen(res) -> None:
    from ..report.markup import TextTable as Table

    verdict = "[red]DEGENERATE[/red]" if res.degenerate else "[green]not degenerate[/green]"
    console.print(f"{escape_markup(res.problem)}: {verdict}; admits precision downgrade: "
                  f"{'[yellow]yes[/yellow] (' + ', '.join(res.downgrade_dtypes) + ')' if res.admits_downgrade else 'no'}")
    for uuid, wd in res.details.get("workloads", {}).items():
        t = Table(title=f"workload {uuid} axes={wd['axes']}")
        for col in ("stand-in", "output", "upstream", "solbench", "failed check"):
            t.add_column(col)
        for r in wd["trivial"]:
            t.add_row(r["candidate"], r["output"], _yn(r["upstream_passed"]), _yn(r["passed"]),
                      str(r.get("failed_check") or "-"))
        for r in wd["downgrade"]:
            if r.get("error"):
                t.add_row(f"reference in {r['dtype']}", "*", "-", "-", r["error"])
            else:
                t.add_row(f"reference in {r['dtype']}", "*", _yn(r["upstream_passed"]),
                          _yn(r["passed"]), str(r.get("failed_check") or "-"))
        console.print(t)
    if res.stress_reference_failed:
        t = Table(title="stress rounds the reference itself fails (stress_reference_failed: "
                        "not judged for any candidate)")
        for col in ("workload", "round", "reason"):
            t.add_column(col, overflow="fold")
        for r in res.stress_reference_failed:
            t.add_row(r["workload"], f"{r['round']} ({r['label']})", r["reason"])
        console.print(t)
    else:
        judged = sum(len(wd.get("stress") or []) for wd in res.details.get("workloads", {}).values())
        if judged:
            console.print(f"stress rounds: the reference holds on all {judged}")
    for s in res.skipped:
        console.print(f"skipped {s['workload']}: {s['reason']}", style="dim", highlight=False,
                      markup=False)


def _yn(v: bool):
    return styled("passes", "red") if v else "fails"
