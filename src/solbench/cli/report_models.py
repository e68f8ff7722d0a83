"""`solbench report --by-model`: print (and with -o write) the per-model table (report/models.py)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import console, err_console


def show_models(rs, results: list[Path], verified: list[Path], verified_only: bool, fmt: str,
                out: Path | None) -> None:
    from dataclasses import asdict

    from ..report.models import (figure, markdown, model_rows, read_verifications, rich_tables,
                                 verify_path, write_tables)
    from ..report.records import _labels_beside, label_for

    labels: dict = {}
    for p in results:
        labels.update(_labels_beside(Path(p)))
    vers = read_verifications([verify_path(p) for p in results] + list(verified))
    rows = model_rows(rs.traces, lambda t: label_for(t, labels), vers, verified_only=verified_only)
    if out is not None:
        paths = write_tables(rows, out) + [figure(rows, Path(out) / "models.png")]
        err_console.print("wrote " + ", ".join(map(str, paths)), highlight=False, markup=False)
    if fmt == "json":
        print(json.dumps([asdict(r) for r in rows], allow_nan=False))
    elif fmt == "markdown":
        print(markdown(rows))
    else:
        for t in rich_tables(rows, verified_only):
            console.print(t)
