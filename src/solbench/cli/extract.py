"""`solbench extract MODEL -o DIR`: SOL-ExecBench problems from a model (docs/extract.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from ..report.markup import TextTable as Table
from rich.text import Text

from .common import clean_errors, console, err_console


def register(app: typer.Typer) -> None:
    @app.command("extract")
    def extract_cmd(
        model: str = typer.Argument(..., help="hf:ARCH (a transformers architecture from its config, random "
                                    "weights), a profiler workload (solbench profile --list) or module:factory"),
        out: Path = typer.Option(..., "-o", "--out", help="output directory (one problem directory per region)"),
        config: Optional[str] = typer.Option(None, "--config", help="hf: config overrides, k=v,k=v"),
        batch: int = typer.Option(1, "--batch", help="the model's real batch size (first workload)"),
        seq: int = typer.Option(128, "--seq", help="the model's real sequence length (text models)"),
        dtype: str = typer.Option("float32", "--dtype", help="hf: parameter dtype (float32, bfloat16, float16)"),
        scale: str = typer.Option("tiny", "--scale", help="profiler workload scale (tiny, small, full)"),
        backward: bool = typer.Option(False, "--backward", help="also extract each region's backward"),
        kinds: Optional[str] = typer.Option(None, "--kinds", help="only these region kinds, comma-separated "
                                            "(attention, mlp, norm, rotary, embedding, routing, experts, moe, block)"),
        hardware: str = typer.Option("H200", "--hardware", "-H", help="GPU spec of the SOL check"),
        as_json: bool = typer.Option(False, "--json", help="print the report (extract_report.json) on stdout"),
    ) -> None:
        """Capture MODEL's graph, cut it into regions (attention, MLP, norms, rotary, embeddings, routing,
        experts, residual blocks), and write each as a checked problem directory. A region that fails a
        check is listed with its reason and not written; exit 1 when none was written."""
        import torch

        from ..errors import SpecError
        from ..extract import RULES, extract, load_source, parse_config

        with clean_errors():
            if batch < 1 or seq < 1:
                raise SpecError(None, "--batch/--seq", "must be >= 1")
            dt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(dtype)
            if dt is None:
                raise SpecError(None, "--dtype", f"{dtype!r} is not float32, bfloat16 or float16")
            chosen = None
            if kinds:
                chosen = {k.strip() for k in kinds.split(",") if k.strip()}
                unknown = chosen - {k for k, _ in RULES}
                if unknown:
                    raise SpecError(None, "--kinds", f"unknown kinds {sorted(unknown)}")
            source = load_source(model, parse_config(config), batch=batch, seq=seq, dtype=dt, scale=scale)
            report = extract(source, out, backward=backward, kinds=chosen, hardware=hardware)
        if as_json:
            typer.echo(json.dumps(report.to_json()))
        else:
            t = Table(title=Text(f"{model}: {len(report.written)} problems written to {out}, "
                                 f"{len(report.failed)} regions failed"))
            for c in ("problem", "kind", "class", "count", "status / reason"):
                t.add_column(c, overflow="fold")
            for r in report.results:
                t.add_row(r.name or "-", r.kind + (" bw" if r.backward else ""), r.cls, str(r.count),
                          "written" if r.status == "written" else f"[red]{r.reason}[/red]")
            console.print(t)
        if not report.written:
            err_console.print("error: no region passed its checks", highlight=False)
            raise typer.Exit(1)
