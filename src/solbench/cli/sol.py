"""`solbench sol PROBLEM`: the speed-of-light bound of every workload of a problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from .common import (LIMIT_HELP, MAX_BYTES_HELP, WORKLOADS_HELP, choose_workloads, clean_errors,
                     console, err_console, parse_bytes)


def _fmt_num(x: float) -> str:
    if not x:
        return "0"
    for unit, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def register(app: typer.Typer) -> None:
    @app.command("sol")
    def sol_cmd(
        problem: Path = typer.Argument(..., help="problem directory or KernelBench .py"),
        hardware: str = typer.Option("H200", "--hardware", "-H", help="spec id (solbench hardware list) or spec.toml"),
        model: str = typer.Option("refined", "--model", "-m", help="refined (ours) or solar (upstream conventions)"),
        workload: Optional[str] = typer.Option(None, "--workloads", "--workload", "-w", help=WORKLOADS_HELP),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help=LIMIT_HELP),
        max_bytes: Optional[str] = typer.Option(None, "--max-bytes", help=MAX_BYTES_HELP),
        as_json: bool = typer.Option(False, "--json", help="strict JSON on stdout"),
    ) -> None:
        """Per-workload T_SOL: FLOPs by class, bytes, each resource's time, the bottleneck."""
        from ..errors import SolbenchError, SpecError
        from ..sol import CountingError, bound, load_hardware
        from ..spec import load_problem
        from ..suites import resolve_problem

        with clean_errors():
            if model not in ("refined", "solar"):
                raise SpecError(None, "--model", f"unknown model {model!r} (refined or solar)")
            hw = load_hardware(hardware)
            p = load_problem(resolve_problem(problem))
            wls = choose_workloads(p, workload, limit, parse_bytes(max_bytes))
            rows = []
            for w in wls:
                try:
                    b = bound(p, w, hw, model)
                    d = b.to_json()
                    d.pop("workload_uuid")
                    rows.append({"uuid": w.uuid, "index": p.workloads.index(w), **d, "bytes": {
                        "fused": b.bytes_fused, "unfused": b.bytes_unfused, "model": b.bytes_model}})
                except CountingError as e:
                    rows.append({"uuid": w.uuid, "index": p.workloads.index(w), "axes": w.axes,
                                 "sol_ms": None, "bottleneck": None,
                                 "error": str(e)})
                except SolbenchError:
                    raise
        if as_json:
            out = {"problem": p.name, "hardware": hw.id, "hardware_kind": hw.kind, "model": model,
                   "workloads": rows}
            typer.echo(json.dumps(out, allow_nan=False))
            return
        t = Table(title=f"{p.name}: T_SOL on {hw.id} ({hw.kind}), model={model}")
        for c in ("#", "axes", "FLOPs by class", "bytes fused", "tensor ms", "cuda ms", "sfu ms",
                  "dram ms", "T_SOL ms", "bound by", "AI"):
            t.add_column(c, justify="left" if c in ("axes", "FLOPs by class", "bound by") else "right",
                         overflow="fold")
        for r in rows:
            i = r["index"]
            if r.get("sol_ms") is None:
                t.add_row(str(i), json.dumps(r["axes"]), f"[red]{escape(r['error'])}[/red]", *["-"] * 8)
                continue
            terms = r["terms_ms"]
            fl = ", ".join(f"{k} {_fmt_num(v)}" for k, v in r["flops"].items()) or "-"
            ai = r["arithmetic_intensity"]
            t.add_row(str(i), ",".join(f"{k}={v}" for k, v in r["axes"].items()), fl,
                      _fmt_num(r["bytes_fused"]) + "B",
                      *(f"{terms.get(k, 0):.4g}" for k in ("tensor", "cuda", "sfu", "dram")),
                      f"{r['sol_ms']:.4g}", r["bottleneck"], "-" if ai is None else f"{ai:.3g}")
        console.print(t)
        unknown = sorted({k for r in rows for k in r.get("unknown_ops", {})})
        if unknown:
            err_console.print(f"[yellow]unknown ops (not counted): {', '.join(unknown)}[/yellow]")
        if any(r.get("real_tensors") for r in rows):
            err_console.print("[yellow]some workloads needed real tensors (data-dependent reference)[/yellow]")
