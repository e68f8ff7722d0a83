"""`solbench hardware list|show`: the bundled GPU specs."""

from __future__ import annotations

import json

import typer
from ..report.markup import TextTable as Table

from .common import clean_errors, console


def register(app: typer.Typer) -> None:
    hw_app = typer.Typer(help="GPU hardware specs (peaks, bandwidth, source).", no_args_is_help=True)
    app.add_typer(hw_app, name="hardware")

    @hw_app.command("list")
    def list_cmd(as_json: bool = typer.Option(False, "--json", help="strict JSON on stdout")) -> None:
        """List the bundled specs with their key peaks."""
        from ..sol import list_hardware

        with clean_errors():
            specs = list_hardware()
        if as_json:
            typer.echo(json.dumps([s.model_dump(mode="json", exclude={"path"}) for s in specs], allow_nan=False))
            return
        t = Table(title="hardware specs (dense peaks)")
        for c in ("id", "kind", "DRAM TB/s", "bf16 TF", "fp8 TF", "fp4 TF", "tf32 TF", "fp32 CUDA TF",
                  "SMs", "clock MHz", "source"):
            t.add_column(c, justify="left" if c in ("id", "kind", "source") else "right", overflow="fold")
        for s in specs:
            tp = s.peak.tensor_flops_per_s

            def tf(x):
                return "-" if not x else f"{x / 1e12:.4g}"
            t.add_row(s.id, s.kind, f"{s.peak.dram_bytes_per_s / 1e12:.3g}", tf(tp.get("bf16")),
                      tf(tp.get("fp8")), tf(tp.get("fp4")), tf(tp.get("tf32")),
                      tf(s.peak.cuda_flops_per_s.get("fp32")), str(s.sm_count or "-"),
                      f"{s.clock_mhz:g}" if s.clock_mhz else "-",
                      (s.source.url or s.source.note or "")[:60])
        console.print(t)

    @hw_app.command("show")
    def show_cmd(name: str = typer.Argument(..., help="spec id or .toml path"),
                 as_json: bool = typer.Option(False, "--json", help="print the spec as JSON")) -> None:
        """Show one spec in full."""
        from ..sol import load_hardware, spec_to_toml

        with clean_errors():
            s = load_hardware(name)
        if as_json:
            typer.echo(json.dumps(s.model_dump(mode="json", exclude={"path"}), allow_nan=False))
        else:
            console.print(spec_to_toml(s), highlight=False, markup=False)
