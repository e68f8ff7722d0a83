"""``solbench validate``: check definitions, workloads and solutions without running them."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .common import console, err_console


def _kind(path: Path) -> str:
    """"problem", "solution", "kernelbench_problem", "kernelbench_candidate" or "dir"."""
    if path.is_dir():
        return "problem" if (path / "definition.json").exists() else "dir"
    if path.suffix == ".py":
        text = path.read_text(errors="replace")
        # a candidate defines ModelNew, or a plain run() without a Model (see solution_from_py)
        is_cand = "class ModelNew" in text or ("def run" in text and "class Model" not in text)
        return "kernelbench_candidate" if is_cand else "kernelbench_problem"
    if path.name == "definition.json" or path.name == "workload.jsonl":
        return "problem"
    if path.suffix == ".json":
        return "solution"
    return "unknown"


def validate_path(path: Path, strict: bool = False) -> list[tuple[bool, str]]:
    """(ok, line) for ``path``: a problem dir, definition/workload file, solution.json,
    KernelBench file, or a directory searched for problem dirs and solution files.
    ``strict``: upstream quirks the loader otherwise accepts with a warning are invalid."""
    from ..errors import SolbenchError
    from ..spec import load_problem, load_solution

    kind = _kind(path)
    if not path.exists():
        return [(False, f"{path}: no such file or directory")]
    if kind == "dir":
        out: list[tuple[bool, str]] = []
        found = sorted(p.parent for p in path.rglob("definition.json"))
        sols = sorted(p for p in path.rglob("*.json") if p.name not in ("definition.json", "metadata.json", "config.json")
                      and not (p.parent / "definition.json").exists() or p.name == "solution.json")
        for d in found:
            out += validate_path(d, strict)
        # a problem dir that lost its definition.json is a broken problem, not nothing
        for wl in sorted(path.rglob("workload.jsonl")):
            if not (wl.parent / "definition.json").exists():
                out.append((False, f"{wl.parent / 'definition.json'}: missing (the directory "
                                   "has a workload.jsonl, so it is meant to be a problem)"))
        for s in sols:
            out += validate_path(s, strict)
        if not found and not sols:
            out.append((False, f"{path}: no problem directories or solutions found"))
        return out
    try:
        if kind in ("problem", "kernelbench_problem"):
            prob = load_problem(path.parent if path.name in ("definition.json", "workload.jsonl") else path,
                                strict=strict)
            missing = prob.missing_blobs()
            line = f"OK {prob.name}: {len(prob.workloads)} workloads"
            if prob.notes:
                line += (f" (warning: {len(prob.notes)} upstream quirk(s) accepted, e.g. {prob.notes[0]}; "
                         "--strict rejects them)")
            if missing:
                line += (f" (warning: {len(missing)} safetensors input(s) have no blob on disk, e.g. "
                         f"{missing[0][2]}; those workloads cannot run)")
            return [(True, line)]
        if kind in ("solution", "kernelbench_candidate"):
            sol = load_solution(path)
            return [(True, f"OK solution {sol.name} for {sol.definition} ({', '.join(sol.spec.languages)})")]
        return [(False, f"{path}: not a problem, solution or KernelBench file")]
    except SolbenchError as e:
        return [(False, str(e))]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return [(False, f"{path}: {type(e).__name__}: {e}")]


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(paths: list[Path] = typer.Argument(..., help="problem dirs, solution.json, KernelBench .py, or folders"),
                 quiet: bool = typer.Option(False, "--quiet", "-q", help="print only problems"),
                 strict: bool = typer.Option(False, "--strict", help="reject upstream SOL-ExecBench quirks "
                                             "(an input given as a workload axis, workload inputs the "
                                             "definition lacks) that are otherwise accepted with a warning")) -> None:
        """Check formats without running anything. Exit 0 when everything is valid; otherwise one
        line per problem naming the file, the field and what is wrong."""
        results: list[tuple[bool, str]] = []
        for p in paths:
            results += validate_path(p, strict)
        bad = [line for ok, line in results if not ok]
        if not quiet:
            for ok, line in results:
                if ok:
                    console.print(line, highlight=False, soft_wrap=True)
        for line in bad:
            err_console.print(f"[red]INVALID[/red] {line}", highlight=False, soft_wrap=True)
        console.print(f"{len(results) - len(bad)} valid, {len(bad)} invalid", highlight=False)
        raise typer.Exit(1 if bad else 0)
