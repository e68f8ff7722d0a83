"""``solbench run`` on a problem directory given by path, then ``solbench report``: the
problem is reported under its own suite (the folder holding it, SOL-ExecBench's ``L1``), not
under the name of the folder the results file is in (``myrun_2026`` read as ``myrun``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.cli import app
from solbench.spec import Trace

from test_cli_daily import DEF  # the x + y problem of the daily-use tests

SOLX_GELU = (Path(__file__).resolve().parents[3] / "shared" / "datasets" / "sol-execbench-dev" / "L1"
             / "025_video_latent_gelu_activation")


@pytest.fixture(autouse=True)
def _own_key(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_DATA_DIR", str(tmp_path / "solbench-data"))
    monkeypatch.delenv("SOLBENCH_TRACE_KEYS", raising=False)


def _run_and_report(problem: Path, tmp_path: Path, *select: str) -> tuple[list[Trace], dict]:
    sols, out = tmp_path / "sols", tmp_path / "myrun_2026" / "results.jsonl"
    r = CliRunner().invoke(app, ["baseline", str(problem), "--eager", "-o", str(sols)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["run", str(problem), "--solutions", str(sols), "--device", "cpu", "--iters", "2",
                                 "--rounds", "1", "-o", str(out), *select])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["report", str(out), "--format", "json"])
    assert r.exit_code == 0, r.output
    return [Trace.from_json_line(x) for x in out.read_text().splitlines()], json.loads(r.stdout)


def test_a_problem_dir_is_reported_under_the_folder_holding_it(tmp_path):
    p = tmp_path / "ds" / "L1" / "add2"
    p.mkdir(parents=True)
    (p / "definition.json").write_text(json.dumps(DEF))
    (p / "workload.jsonl").write_text(json.dumps({"uuid": "a1000000-0000-0000-0000-000000000000", "axes": {"n": 16},
                                                  "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}}) + "\n")
    (t,), rep = _run_and_report(p, tmp_path)
    assert t.evaluation.suite == "L1"
    assert [lb["suite"] for lb in rep["leaderboards"]] == ["L1"]  # was "myrun"


@pytest.mark.skipif(not SOLX_GELU.is_dir(), reason="../shared holds no SOL-ExecBench development dataset")
def test_a_sol_execbench_problem_is_reported_under_its_subset(tmp_path):
    (t,), rep = _run_and_report(SOLX_GELU, tmp_path, "--limit", "1")
    assert (t.definition, t.evaluation.suite) == ("025_video_latent_gelu_activation", "L1")
    assert [lb["suite"] for lb in rep["leaderboards"]] == ["L1"]
