"""`solbench calibrate`: measure attainable ceilings on this GPU and write a measured spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console, err_console


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate_cmd(
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="write the measured spec TOML here"),
        base: Optional[str] = typer.Option(None, "--base", help="datasheet spec to inherit unmeasured peaks from"),
        buffer_gib: float = typer.Option(2.0, "--buffer-gib", help="stream buffer size (GiB)"),
        gemm_n: int = typer.Option(8192, "--gemm-n", help="GEMM size M=N=K"),
        as_json: bool = typer.Option(False, "--json", help="strict JSON on stdout"),
    ) -> None:
        """Copy / read / write bandwidth and GEMM FLOP/s per dtype on random data (needs CUDA)."""
        import torch

        from ..errors import SolbenchError
        from ..sol import spec_to_toml
        from ..sol.calibrate import calibrate

        with clean_errors():
            if not torch.cuda.is_available():
                raise SolbenchError("calibrate: no CUDA GPU on this machine")
            try:
                spec, raw = calibrate(base, buffer_bytes=int(buffer_gib * (1 << 30)), gemm_n=gemm_n,
                                      log=(lambda s: None) if as_json else (lambda s: err_console.print(s)))
            except RuntimeError as e:
                raise SolbenchError(f"calibrate: {e}") from None
        text = spec_to_toml(spec)
        if output:
            output.write_text(text)
        if as_json:
            typer.echo(json.dumps({"spec": spec.model_dump(mode="json", exclude={"path"}), "raw": raw},
                                  allow_nan=False))
        else:
            console.print(text, highlight=False, markup=False)
            if output:
                err_console.print(f"wrote {output}", markup=False)
