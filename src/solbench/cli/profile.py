"""`solbench profile`: the workload profiler (addressable fraction of a real model's time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from ..report.markup import TextTable as Table

from .common import escape_markup, check_device, clean_errors, console, err_console


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def report_filename(r: dict[str, Any]) -> str:
    """``profile_<workload>_<mode>_<scale>.json``"""
    return f"profile_{r['workload']}_{r['mode']}_{r['scale']}.json"


def print_report(r: dict[str, Any], top: int = 10) -> None:
    """Render one ProfileReport dict as rich tables."""
    af = r["addressable_fraction"]
    console.print(
        f"[bold]{r['workload']}[/bold] {r['mode']} ({r['scale']}) on {r['device_name']}: "
        f"wall {r['wall_ms']:.3f} ms (median of {r['steps']['wall']}), busy {r['busy_ms']:.3f} ms "
        f"({r['busy_over_wall']:.0%} of wall){'  [yellow]LAUNCH-BOUND[/yellow]' if r['launch_bound'] else ''}; "
        f"classified by {r['classified_by']}", highlight=False)
    t = Table(title="addressable fraction")
    for c in ("", "over busy", "over wall"):
        t.add_column(c, justify="right" if c else "left")
    t.add_row("strict (framework-native)", f"{af['strict_busy']:.1%}", f"{af['strict_wall']:.1%}")
    t.add_row("loose (+ other vendor)", f"{af['loose_busy']:.1%}", f"{af['loose_wall']:.1%}")
    console.print(t)
    t = Table(title="time by class (per step)")
    for c in ("class", "ms", "busy", "wall", "launches"):
        t.add_column(c, justify="left" if c == "class" else "right")
    for name, c in sorted(r["classes"].items(), key=lambda kv: -kv[1]["ms"]):
        if c["ms"] > 0:
            t.add_row(name, f"{c['ms']:.3f}", f"{c['share_busy']:.1%}", f"{c['share_wall']:.1%}", str(c["count"]))
    for name, c in r["subclasses"].items():
        t.add_row(f"  native: {name}", f"{c['ms']:.3f}", f"{c['share_busy']:.1%}", f"{c['share_wall']:.1%}",
                  str(c["count"]))
    console.print(t)
    t = Table(title=f"top {top} aten ops (launching op)")
    for c in ("op", "ms", "wall", "classes"):
        t.add_column(c, justify="right" if c in ("ms", "wall") else "left")
    for o in r["ops"][:top]:
        t.add_row(o["op"], f"{o['ms']:.3f}", f"{o['share_wall']:.1%}",
                  ", ".join(f"{k} {v:.2f}" for k, v in list(o["classes"].items())[:3]))
    console.print(t)
    t = Table(title=f"top {top} addressable kernels (candidates for new problems)")
    for c in ("kernel", "op", "phase", "sub-class", "ms", "wall", "shapes"):
        t.add_column(c, justify="right" if c in ("ms", "wall") else "left", overflow="fold")
    for k in r["top_kernels"][:top]:
        t.add_row(k["kernel"][:70], k["op"], k.get("phase", ""), k["subclass"] or k["cls"], f"{k['ms']:.3f}",
                  f"{k['share_wall']:.1%}", str(k["shapes"][:1])[:60])
    console.print(t)
    for w in r.get("warnings", []):
        err_console.print(f"[yellow]warning:[/yellow] {escape_markup(w)}", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("profile")
    def profile_cmd(
        workload: Optional[str] = typer.Argument(None, help="workload name (see --list)"),
        list_: bool = typer.Option(False, "--list", help="list the workloads"),
        mode: str = typer.Option("infer", "--mode", help="infer (=prefill) | decode (Llama) | train"),
        scale: Optional[str] = typer.Option(None, "--scale", help="tiny | small | full (default: full on "
                                            "CUDA, tiny on CPU)"),
        device: Optional[str] = typer.Option(None, "--device", help="cuda | cpu (default: cuda if available)"),
        sweep: bool = typer.Option(False, "--sweep", help="profile the Llama family (135m, 1b, 8b) in --mode "
                                   "and draw addressable fraction vs model size"),
        json_out: bool = typer.Option(False, "--json", help="print the report(s) as JSON on stdout"),
        out: Optional[Path] = typer.Option(None, "-o", "--out", help="write JSON report(s) and figure(s) here"),
        steps: int = typer.Option(20, "--steps", help="unprofiled wall-clock steps (median; >= 20)"),
        active: int = typer.Option(3, "--active", help="profiled steps"),
        warmup: int = typer.Option(3, "--warmup", help="warm-up steps"),
        threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default 1 on CPU)"),
        top: int = typer.Option(10, "--top", help="rows in the op and kernel tables"),
    ) -> None:
        """Profile a workload: time by kernel class and the addressable fraction."""
        from ..profile.workloads import SCALES, WORKLOADS

        if list_:
            rows = [{"name": s.name, "domain": s.domain, "description": s.description, "modes": list(s.modes),
                     "full_scale": s.shapes().get("full", "")} for s in WORKLOADS.values()]
            if json_out:
                print(json.dumps({"workloads": rows}))
                return
            t = Table(title="workloads")
            for c in ("name", "domain", "description", "modes", "full scale"):
                t.add_column(c)
            for r in rows:
                t.add_row(r["name"], r["domain"], r["description"], ", ".join(r["modes"]), r["full_scale"])
            console.print(t)
            return
        if not sweep and workload is None:
            err_console.print("[red]error:[/red] name a WORKLOAD (see --list) or pass --sweep")
            raise typer.Exit(2)
        if steps < 20:
            err_console.print(f"[red]error:[/red] --steps: the wall time is a median of >= 20 steps, got {steps}")
            raise typer.Exit(2)
        if active < 1 or warmup < 0:
            err_console.print("[red]error:[/red] --active must be >= 1 and --warmup >= 0")
            raise typer.Exit(2)
        dev = check_device(device)
        sc = scale or ("full" if dev.startswith("cuda") else "tiny")
        if sc not in SCALES:
            err_console.print(f"[red]error:[/red] --scale: {sc!r} not in {list(SCALES)}")
            raise typer.Exit(2)
        th = threads if threads is not None else (1 if dev == "cpu" else None)
        from ..profile import figures
        from ..profile.pipeline import llama_sweep, profile

        kw = dict(wall_steps=steps, active_steps=active, warmup=warmup, threads=th)
        with clean_errors():
            if sweep:
                reports = [r.model_dump(mode="json") for r in llama_sweep(mode, sc, dev, **kw)]
            else:
                reports = [profile(workload, mode, sc, dev, **kw).model_dump(mode="json")]
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for r in reports:
                (out / report_filename(r)).write_text(json.dumps(r, indent=1))
            stem = f"profile_llama_sweep_{mode}_{sc}" if sweep else report_filename(reports[0])[:-5]
            figures.class_bars(reports, out / f"{stem}_classes.png")
            if sweep:
                figures.sweep_figure(reports, out / f"{stem}.png")
        if json_out:
            print(json.dumps({"sweep": reports} if sweep else reports[0]))
            return
        for r in reports:
            print_report(r, top)
        if sweep:
            t = Table(title="Llama sweep: addressable fraction")
            for c in ("workload", "params", "wall ms", "strict busy", "strict wall", "loose busy", "loose wall"):
                t.add_column(c, justify="left" if c == "workload" else "right")
            for r in reports:
                af = r["addressable_fraction"]
                t.add_row(r["workload"], f"{r['config']['parameters']:,}", f"{r['wall_ms']:.2f}",
                          *(f"{af[k]:.1%}" for k in ("strict_busy", "strict_wall", "loose_busy", "loose_wall")))
            console.print(t)
        if out is not None:
            console.print(f"wrote {out}", highlight=False, markup=False)
