"""`solbench project PROFILE.json RESULTS.jsonl...`: end-to-end gain of evaluated problems on a
profiled workload (Amdahl over the mapped kernels, beside the study's simpler formula). Only
correct candidates (PASSED on every workload) count (``profile.amdahl.problem_results``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from ..report.markup import TextTable as Table

from .common import escape_markup, clean_errors, console, err_console

FRACTIONS = ("strict_wall", "loose_wall", "strict_busy", "loose_busy")


def load_profile(path: Path, workload: str | None = None, mode: str | None = None) -> dict[str, Any]:
    """Read a ProfileReport JSON, or pick one from a bundle ``{"reports": [...]}`` (as
    bench/profile_device.py writes) by ``workload`` and ``mode``. Raises SpecError naming the
    file and the field at fault."""
    from pydantic import ValidationError

    from ..errors import SpecError
    from ..profile.pipeline import ProfileReport

    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise SpecError(path, "", f"cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise SpecError(path, f"line {e.lineno}", f"invalid JSON: {e.msg}") from None
    where = ""
    if isinstance(data, dict) and isinstance(data.get("reports"), list):
        picks = [(i, r) for i, r in enumerate(data["reports"]) if isinstance(r, dict)
                 and (workload is None or r.get("workload") == workload) and (mode is None or r.get("mode") == mode)]
        if len(picks) != 1:
            have = ", ".join(f"{r.get('workload')}/{r.get('mode')}" for r in data["reports"] if isinstance(r, dict))
            raise SpecError(path, "reports", f"{len(picks)} reports match --workload {workload} --mode {mode}; "
                            f"the bundle holds: {have}")
        where, data = f"reports[{picks[0][0]}].", picks[0][1]
    try:
        return ProfileReport.model_validate(data).model_dump(mode="json")
    except ValidationError as e:
        err = e.errors()[0]
        field = where + ".".join(str(x) for x in err["loc"])
        raise SpecError(path, field, f"not a solbench profile: {err['msg']}") from None


def register(app: typer.Typer) -> None:
    @app.command("project")
    def project_cmd(
        profile: Path = typer.Argument(..., help="a profile JSON (solbench profile --json / -o)"),
        results: list[Path] = typer.Argument(..., help="traces JSONL files (solbench run / evaluate output)"),
        problem_map: Optional[Path] = typer.Option(None, "--map", help="problem -> replaced kernels map "
                                                   "(default: the bundled solbench/profile/problem_map.json)"),
        fraction: str = typer.Option("strict_wall", "--fraction", help="addressable fraction for the "
                                     "study's formula: " + " | ".join(FRACTIONS)),
        workload: Optional[str] = typer.Option(None, "--workload", help="pick this workload from a bundle"),
        mode: Optional[str] = typer.Option(None, "--mode", help="pick this mode from a bundle"),
        json_out: bool = typer.Option(False, "--json", help="print the projection as JSON"),
        include_unverified: bool = typer.Option(False, "--include-unverified",
                                                help="also use trace lines that fail authentication"),
    ) -> None:
        """Project the end-to-end gain of evaluated problems on a profiled workload."""
        from ..profile.amdahl import load_problem_map, load_results, project

        if fraction not in FRACTIONS:
            err_console.print(f"[red]error:[/red] --fraction: {fraction!r} not in {list(FRACTIONS)}")
            raise typer.Exit(2)
        with clean_errors():
            prof = load_profile(profile, workload, mode)
            traces = [t for r in results for t in load_results(r, include_unverified=include_unverified)]
            entries = load_problem_map(problem_map)
            res = project(prof, traces, entries, fraction=fraction)
        if json_out:
            print(json.dumps(res))
            return
        p = res["profile"]
        console.print(f"[bold]{p['workload']}[/bold] {p['mode']} ({p['scale']}) on {p['device_name']}: "
                      f"wall {p['wall_ms']:.3f} ms", highlight=False)
        t = Table(title="problems mapped to the kernels they replace")
        for c in ("problem", "map entry", "best correct solution", "speedup", "won", "wall share p_j", "time saved"):
            t.add_column(c, justify="right" if c in ("speedup", "wall share p_j", "time saved") else "left")
        for r in res["problems"]:
            best = r["best_solution"] or f"- (none correct, {r['passed']}/{r['workloads']} passed)"
            t.add_row(r["problem"], r["map_entry"], best,
                      f"{r['raw_speedup']:.3f}x" if r["best_solution"] else "1x",
                      "yes" if r["won"] else "no", f"{r['share_wall']:.2%}", f"{r['time_saved']:.2%}")
        console.print(t)
        if res["unmapped"]:
            err_console.print(f"[yellow]not in the problem map (not projected):[/yellow] {escape_markup(', '.join(res['unmapped']))}",
                              highlight=False)
        a, s = res["amdahl_mapped"], res["study_simple"]
        t = Table(title="end-to-end projection")
        for c in ("projection", "formula", "time saved", "end-to-end speedup"):
            t.add_column(c, justify="right" if c in ("time saved", "end-to-end speedup") else "left")
        t.add_row("amdahl_mapped (solbench)", f"sum p_j(1-1/s_j) over {a['share_wall_mapped']:.2%} of wall",
                  f"{a['time_saved']:.2%}", f"{a['end_to_end_speedup']:.4f}x")
        gain = s["gain"]
        if s["median_speedup"] is None:
            formula = (f"{s['addressable_fraction']:.3f} ({s['fraction']}) x 0 win: nothing won "
                       f"(0 of {s['problems_evaluated']} problems)")
        else:
            formula = (f"{s['addressable_fraction']:.3f} ({s['fraction']}) x {s['win_rate']:.3f} win "
                       f"x (1 - 1/{s['median_speedup']:.3f})")
        t.add_row("study_simple", formula, f"{gain:.2%}", f"{1 / (1 - gain):.4f}x")
        console.print(t)
