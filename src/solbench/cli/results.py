"""`solbench results ...`: the results store. `verify` (which lines solbench wrote), `query`
(SQL over the DuckDB views traces / workloads / candidates / findings / sources), `merge`
(--shard outputs into one file), `export` (Parquet / CSV)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import escape_markup, clean_errors, console, err_console

results_app = typer.Typer(help="Results store: verify, query (SQL), merge shards, export.",
                          no_args_is_help=True)


def _load(paths, include_unverified):
    from ..errors import SolbenchError
    from ..report.records import load

    try:
        return load(paths, include_unverified=include_unverified)
    except ValueError as e:
        raise SolbenchError(str(e)) from None


@results_app.command("verify")
def verify_cmd(
    results: list[Path] = typer.Argument(..., help="results JSONL files"),
    json_out: bool = typer.Option(False, "--json", help="print each file's state and rejected lines as JSON"),
) -> None:
    """Check every line's authentication; exit 1 when any line was not written by solbench."""
    from ..store import read_store

    bad = False
    out = []
    with clean_errors():
        for p in results:
            r = read_store(p)
            bad |= bool(r.rejected or r.gaps)
            out.append({"file": str(p), "state": "legacy" if r.legacy else "authenticated", "counts": r.counts,
                        "rejected": [{"line": x.line, "state": x.state, "reason": x.reason} for x in r.rejected],
                        "gaps": r.gaps, "runs": {k: v.get("verified") for k, v in r.runs.items()}})
    if json_out:
        print(json.dumps(out))
    else:
        for o in out:
            c = o["counts"]
            state = "unauthenticated (legacy)" if o["state"] == "legacy" else "authenticated"
            console.print(f"{o['file']}: {state}; verified {c.get('verified', 0)}, legacy {c.get('legacy', 0)}, "
                          f"rejected {c.get('rejected', 0)}", highlight=False, markup=False)
            for x in o["rejected"]:
                console.print(f"  [red]line {x['line']}[/red] ({escape_markup(x['state'])}): {escape_markup(x['reason'])}", highlight=False)
            for run, seqs in o["gaps"].items():
                console.print(f"  [red]run {run[:8]}[/red]: missing seq {seqs[:10]}", highlight=False)
    if bad:
        raise typer.Exit(1)


@results_app.command("query")
def query_cmd(
    sql: str = typer.Argument(..., help="SQL over the views traces, workloads, candidates, findings, sources"),
    results: list[Path] = typer.Argument(..., help="results JSONL files"),
    fmt: str = typer.Option("table", "--format", help="table | csv | json"),
    db: Optional[Path] = typer.Option(None, "--db", help="also keep the DuckDB database in this file"),
    include_unverified: bool = typer.Option(False, "--include-unverified", help="also use lines that fail authentication (marked)"),
) -> None:
    """Run SQL on a DuckDB database built from the results files (docs/reports.md lists the columns)."""
    from ..report import db as sdb

    if fmt not in ("table", "csv", "json"):
        err_console.print(f"[red]error:[/red] --format: {fmt!r} not in ['table', 'csv', 'json']")
        raise typer.Exit(2)
    with clean_errors():
        rs = _load(results, include_unverified)
        con = sdb.build(rs, db or ":memory:")
        cols, rows = sdb.query(con, sql)
    if fmt == "json":
        print(json.dumps([dict(zip(cols, r)) for r in rows], default=str))
    elif fmt == "csv":
        import csv
        import sys

        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    else:
        from ..report.markup import TextTable as Table

        t = Table()
        for c in cols:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*("" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v)) for v in r))
        console.print(t)


@results_app.command("export")
def export_cmd(
    results: list[Path] = typer.Argument(..., help="results JSONL files"),
    out: Path = typer.Option(..., "-o", "--out", help="folder for <view>.parquet / .csv"),
    fmt: str = typer.Option("parquet", "--format", help="parquet | csv"),
    include_unverified: bool = typer.Option(False, "--include-unverified", help="also use lines that fail authentication (marked)"),
) -> None:
    """Write the views (traces, findings, workloads, candidates, sources) as Parquet or CSV."""
    from ..report import db as sdb

    if fmt not in ("parquet", "csv"):
        err_console.print(f"[red]error:[/red] --format: {fmt!r} not in ['parquet', 'csv']")
        raise typer.Exit(2)
    with clean_errors():
        rs = _load(results, include_unverified)
        paths = sdb.export(sdb.build(rs), out, fmt)
    for p in paths:
        console.print(str(p), highlight=False)


@results_app.command("merge")
def merge_cmd(
    shards: list[Path] = typer.Argument(..., help="results files of solbench run --shard I/N"),
    out: Path = typer.Option(..., "-o", "--out", help="merged results file (must not exist)"),
    adopt_legacy: bool = typer.Option(False, "--adopt-legacy", help="sign the traces of unauthenticated "
                                      "(legacy) shards with your key (you vouch for them)"),
) -> None:
    """Merge shard results: verified lines are copied as written (their MACs stay valid), each
    shard's manifest runs carried over; lines solbench did not write are left out and listed."""
    from ..store import merge

    with clean_errors():
        res = merge(shards, out, adopt_legacy=adopt_legacy)
    console.print(f"{out}: {res['written']} traces from {len(shards)} shards"
                  + (f", {res['duplicates']} duplicates dropped" if res["duplicates"] else ""), highlight=False)
    for line in res["left_out"]:
        err_console.print(f"[yellow]left out:[/yellow] {escape_markup(line)}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")
