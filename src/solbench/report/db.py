"""DuckDB database of results files, for SQL queries and Parquet/CSV export.

Built from the verified traces (``store.read_store`` through ``report.records.load``), in
memory or in a file. It lives in ``report`` because it is built from the report's rows and
leaderboards (the store below never imports the report: docs/architecture.md). Base tables and views (columns: docs/reports.md, "Results database"):

``traces``      one row per accepted trace (``report.records.TraceRow`` without raw samples):
                file, line, provenance (verified | legacy | unverified:<state>), suite,
                hardware, definition, solution, label, workload, status, latency_ms,
                reference_latency_ms, speedup, t_sol_ms, sol_score, headroom, sol_distance,
                raw_* figures, timing method, FLOP, bytes, arithmetic intensity, findings counts
``findings``    one row per finding: file, line, definition, solution, label, workload,
                status, check_name, severity, message, evidence (JSON text)
``workloads``   one row per (suite, hardware, definition, workload): axes, T_SOL, median
                reference latency, candidates, traces, passed, best PASSED latency
``candidates``  one row per (suite, hardware, label), problem-level (the report's
                leaderboard: ranks, correct / incorrect / hack problems, mean SOL score raw
                and hack-adjusted, fast_1, geomean speedup)
``sources``     one row per results file: state (authenticated | legacy), counts
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

VIEWS = ("traces", "findings", "workloads", "candidates", "sources")


def _require_duckdb():
    try:
        import duckdb
    except ImportError:  # pragma: no cover - duckdb is a dependency
        from ..errors import SolbenchError

        raise SolbenchError("duckdb is not installed: pip install duckdb") from None
    return duckdb


def _arrow(rows: list[dict[str, Any]], cls=None, columns: dict[str, Any] | None = None):
    import pyarrow as pa

    if columns is None:
        columns = {}
        for f in dataclasses.fields(cls):
            t = str(f.type)
            if t.startswith("list"):
                continue
            columns[f.name] = (pa.float64() if "float" in t else pa.int64() if t.startswith("int")
                               else pa.bool_() if t.startswith("bool") else pa.string())
    schema = pa.schema(list(columns.items()))
    return pa.Table.from_pylist([{k: r.get(k) for k in columns} for r in rows], schema=schema)


def build(rs, path: str | Path = ":memory:"):
    """A DuckDB connection holding the tables and views of the module docstring, built from
    a ``report.records.ResultSet``. ``path`` other than ``:memory:`` is overwritten."""
    import pyarrow as pa

    from .aggregate import leaderboards
    from .records import FindingRow, TraceRow

    duckdb = _require_duckdb()
    if str(path) != ":memory:":
        Path(path).unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    tr = _arrow([r.table_dict() for r in rs.rows], TraceRow)
    fr = _arrow([dataclasses.asdict(f) for f in rs.findings], FindingRow)
    cand = []
    for (suite, hw), cs in leaderboards(rs.rows).items():
        for c in cs:
            d = c.to_json()
            cand.append({"suite": suite, "hardware": hw, "rank": d["rank"], "label": d["label"],
                         "problems": d["problems"], "correct": d["correct"], "incorrect": d["incorrect"],
                         "hack": d["hack"], "mean_sol_score": d["mean_sol_score"],
                         "raw_mean_sol_score": d["raw_mean_sol_score"],
                         "mean_sol_score_correct": d["mean_sol_score_correct"],
                         "fast_1": d["fast_p"].get("1"), "raw_fast_1": d["raw_fast_p"].get("1"),
                         "geomean_speedup": d["geomean_speedup"], "median_speedup": d["median_speedup"],
                         "mean_headroom": d["mean_headroom"], "workloads": d["workloads"]})
    cand_cols = {"suite": pa.string(), "hardware": pa.string(), "rank": pa.int64(), "label": pa.string(),
                 "problems": pa.int64(), "correct": pa.int64(), "incorrect": pa.int64(), "hack": pa.int64(),
                 "mean_sol_score": pa.float64(), "raw_mean_sol_score": pa.float64(),
                 "mean_sol_score_correct": pa.float64(), "fast_1": pa.float64(), "raw_fast_1": pa.float64(),
                 "geomean_speedup": pa.float64(), "median_speedup": pa.float64(), "mean_headroom": pa.float64(),
                 "workloads": pa.int64()}
    src = [{"file": str(r.path), "state": "legacy" if r.legacy else "authenticated",
            "verified": r.counts.get("verified", 0), "legacy": r.counts.get("legacy", 0),
            "rejected": r.counts.get("rejected", 0),
            "included_unverified": sum(1 for p in r.provenance if p.startswith("unverified")),
            "runs": len(r.runs)} for r in rs.reads]
    src_cols = {"file": pa.string(), "state": pa.string(), "verified": pa.int64(), "legacy": pa.int64(),
                "rejected": pa.int64(), "included_unverified": pa.int64(), "runs": pa.int64()}
    for name, tab in (("trace_rows", tr), ("finding_rows", fr),
                      ("candidate_rows", _arrow(cand, columns=cand_cols)),
                      ("source_rows", _arrow(src, columns=src_cols))):
        con.register(f"_{name}", tab)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
        con.unregister(f"_{name}")
    con.execute("CREATE VIEW traces AS SELECT * FROM trace_rows")
    con.execute("CREATE VIEW findings AS SELECT * FROM finding_rows")
    con.execute("CREATE VIEW candidates AS SELECT * FROM candidate_rows")
    con.execute("CREATE VIEW sources AS SELECT * FROM source_rows")
    con.execute("""
        CREATE VIEW workloads AS
        SELECT suite, hardware, definition, workload, any_value(axes) AS axes,
               min(t_sol_ms) AS t_sol_ms, median(reference_latency_ms) AS reference_latency_ms,
               count(DISTINCT label) AS candidates, count(*) AS traces,
               count(*) FILTER (WHERE status = 'PASSED') AS passed,
               min(latency_ms) FILTER (WHERE status = 'PASSED') AS best_latency_ms
        FROM trace_rows GROUP BY suite, hardware, definition, workload""")
    return con


def query(con, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql``; returns (column names, rows). Raises SolbenchError with DuckDB's message."""
    from ..errors import SolbenchError

    duckdb = _require_duckdb()
    try:
        cur = con.execute(sql)
    except duckdb.Error as e:
        raise SolbenchError(f"query failed: {str(e).splitlines()[0]}") from None
    if cur.description is None:
        return [], []
    return [d[0] for d in cur.description], cur.fetchall()


def export(con, out_dir: str | Path, fmt: str = "parquet", views: Sequence[str] = VIEWS) -> list[Path]:
    """Write each view to ``out_dir/<view>.parquet`` (or ``.csv``); returns the paths."""
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"format must be parquet or csv, not {fmt!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for v in views:
        p = out / f"{v}.{fmt}"
        opt = "(FORMAT PARQUET)" if fmt == "parquet" else "(FORMAT CSV, HEADER)"
        con.execute(f"COPY (SELECT * FROM {v}) TO '{str(p).replace(chr(39), chr(39) * 2)}' {opt}")
        paths.append(p)
    return paths
