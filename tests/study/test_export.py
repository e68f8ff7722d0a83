"""solbench export: the bundle reads back unchanged through solbench report and DuckDB, and its
manifest names the code version, hardware, seeds and problem hashes."""

from __future__ import annotations

import hashlib
import json

import duckdb
import pytest
from typer.testing import CliRunner

from test_verify import RELU, SUM, lab, trace

from solbench.cli import app
from solbench.report.models import model_rows, read_verifications, verify_path
from solbench.report.records import label_for, load
from solbench.store import append_traces, auth
from solbench.study.export import export, problem_hash
from solbench.suites import DATA_ROOT


@pytest.fixture
def results(tmp_path):
    res = tmp_path / "run" / "results.jsonl"
    ts = [trace(RELU, lab("A"), "h1", "r0", speedup=2.0, seed="11"),
          trace(SUM, lab("A"), "h2", "s0", "INCORRECT_NUMERICAL", seed="12"),
          trace(RELU, lab("B"), "h3", "r0", speedup=0.5, seed="13"),
          trace(SUM, lab("B"), "h4", "s0", "COMPILE_ERROR", seed="14")]
    append_traces(res, ts)
    rec = {"definition": RELU, "solution": lab("A"), "solution_hash": "h1", "verdict": "verified",
           "claimed_speedup": 2.0, "verified_speedup": 1.8, "verified_speedup_low": 1.7, "workloads": []}
    verify_path(res).write_text(json.dumps(auth.sign(rec, auth.load_key(create=True))) + "\n")
    return res


def _report_json(path, *extra):
    r = CliRunner().invoke(app, ["report", str(path), "--format", "json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _strip_files(obj):
    if isinstance(obj, dict):
        return {k: _strip_files(v) for k, v in obj.items() if k not in ("file", "line", "files")}
    if isinstance(obj, list):
        return [_strip_files(v) for v in obj]
    return obj


def test_bundle_reads_back_unchanged(results, tmp_path):
    bundle = tmp_path / "bundle"
    m = export([results], bundle)
    assert m["traces"] == 4 and m["verifications"] == 1
    assert {p.name for p in bundle.iterdir()} >= {
        "traces.jsonl", "traces.jsonl.manifest.json", "traces.jsonl.verify.jsonl", "manifest.json",
        "traces.parquet", "findings.parquet", "workloads.parquet", "candidates.parquet",
        "sources.parquet", "models.parquet", "models.csv"}
    # solbench report: same leaderboards and per-model rows from the bundle as from the run
    assert _strip_files(_report_json(bundle / "traces.jsonl")) == _strip_files(_report_json(results))
    assert _report_json(bundle / "traces.jsonl", "--by-model") == _report_json(results, "--by-model")
    by_model = {r["config"]: r for r in _report_json(bundle / "traces.jsonl", "--by-model")}
    assert by_model["A T=0 turn 1"]["verified"] == 1 and by_model["A T=0 turn 1"]["verified_median"] == 1.8
    # DuckDB reads the Parquet as the traces view of the original results
    rs = load([results], quiet=True)
    cols = ["definition", "solution", "label", "workload", "status", "speedup", "latency_ms"]
    got = duckdb.sql(f"SELECT {', '.join(cols)} FROM read_parquet('{bundle / 'traces.parquet'}') "
                     "ORDER BY definition, solution").fetchall()
    want = sorted((tuple(getattr(r, c) for c in cols) for r in rs.rows), key=lambda x: (x[0], x[1]))
    assert got == want
    mrow = duckdb.sql(f"SELECT config, units, correct_rate, verified FROM read_parquet('{bundle / 'models.parquet'}') "
                      "ORDER BY config").fetchall()
    assert mrow == [("A T=0 turn 1", 2, 0.5, 1), ("B T=0 turn 1", 2, 0.5, 0)]  # B: relu correct at 0.5x
    # the manifest: code version, runs (host, GPUs), seeds, problem hashes, file hashes
    assert m["solbench"]["version"] and "commit" in m["solbench"]
    assert len(m["runs"]) == 1 and m["runs"][0]["host"]["cpu_count"] >= 1
    assert sorted(s["input_seed"] for s in m["seeds"]) == ["11", "12", "13", "14"]
    relu = DATA_ROOT / "l1" / RELU
    h = hashlib.sha256(b"definition.json\0" + (relu / "definition.json").read_bytes()
                       + b"workload.jsonl\0" + (relu / "workload.jsonl").read_bytes()).hexdigest()
    assert m["problems"][RELU] == {"path": str(relu), "sha256": h} and problem_hash(relu) == h
    assert m["files"]["traces.jsonl"] == hashlib.sha256((bundle / "traces.jsonl").read_bytes()).hexdigest()
    assert json.loads((bundle / "manifest.json").read_text()) == m
    # a second export into the same folder is refused
    with pytest.raises(Exception, match="not empty"):
        export([results], bundle)


def test_cli_export(results, tmp_path):
    r = CliRunner().invoke(app, ["export", str(results), "-o", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "4 traces, 1 verification records, 2 problems" in r.stdout
    rows = model_rows(load([tmp_path / "b" / "traces.jsonl"], quiet=True).traces, lambda t: label_for(t, {}),
                      read_verifications([tmp_path / "b" / "traces.jsonl.verify.jsonl"]))
    assert [r.verified for r in rows] == [1, 0]
