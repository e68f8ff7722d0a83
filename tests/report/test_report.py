"""Leaderboards, figure statistics and the HTML report on hand-made traces (values worked
out by hand in report_fixtures.py)."""

from __future__ import annotations

import json
import math

import pytest

from report_fixtures import distance_traces, leaderboard_traces, mk

import solbench.store as store
from solbench.report.aggregate import leaderboards, pearson, score_vs_headroom, speedup_vs_distance
from solbench.report.html import build_report, render_terminal
from solbench.report.records import load


@pytest.fixture
def results(tmp_path):
    d = tmp_path / "runs" / "x_0"
    p = d / "results.jsonl"
    store.append_traces(p, leaderboard_traces() + distance_traces())
    return p


def test_pearson_by_hand():
    assert pearson([0, 1, 2], [0, 1, 1]) == pytest.approx(math.sqrt(3) / 2)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 2], [1, 2]) is None and pearson([1, 1, 1], [1, 2, 3]) is None


def test_leaderboard_by_hand(results):
    rs = load([results])
    lb = leaderboards([r for r in rs.rows if r.definition.startswith("p")])
    (key, cands), = lb.items()
    assert key == ("x", "NVIDIA H200")  # suite from the results folder (x_0), hardware from the traces
    by = {c.label: c for c in cands}
    f = by["fast"]
    assert (f.problems, f.correct, f.incorrect, f.hack) == (4, 2, 1, 1)
    assert f.mean_sol_score == pytest.approx((0.9 / 1.3 + 3.9 / 4.8) / 2 / 4 + 0.55 / 4)
    assert f.mean_sol_score == pytest.approx(0.325601, abs=1e-6)
    assert f.raw_mean_sol_score == pytest.approx(0.516390, abs=1e-6)
    assert f.mean_sol_score_correct == pytest.approx(0.651202, abs=1e-6)
    assert f.fast_p == {"0": 0.5, "0.5": 0.5, "1": 0.5, "1.5": 0.25, "2": 0.25}
    assert f.raw_fast_p["1"] == 0.75 and f.raw_fast_p["2"] == 0.5
    assert f.geomean_speedup == pytest.approx(math.sqrt(math.sqrt(8) * 1.2))
    s = by["slow"]
    assert s.mean_sol_score == pytest.approx((0.9 / 2.8 + 0.5) / 2 / 2 + 0.5 / 2)
    assert s.fast_p["1"] == 0.0
    # ranked by mean SOL score
    assert [c.label for c in cands] == ["slow_ref_only", "slow", "fast"]
    assert [c.rank for c in cands] == [1, 2, 3]
    assert by["slow"].coverage == 0.5 and by["fast"].coverage == 1.0


def test_figure_statistics_by_hand(results):
    rs = load([results])
    d_rows = [r for r in rs.rows if r.definition.startswith("d")]
    xs, ys, r = speedup_vs_distance(d_rows)
    assert r == pytest.approx(math.sqrt(3) / 2)
    xs, ys, r = score_vs_headroom(d_rows)
    import numpy as np  # an independent computation of r
    assert r == pytest.approx(float(np.corrcoef(xs, ys)[0, 1]))
    # S = 1/(2 - h) on every point
    assert all(y == pytest.approx(1 / (2 - x)) for x, y in zip(xs, ys))


def test_html_report(results, tmp_path):
    out = tmp_path / "rep"
    data = build_report(load([results]), out, title="fixture report")
    f = data["figures"]
    assert f["speedup_vs_sol_distance"]["n"] == 10  # every PASSED trace (7 + 3) has a SOL block
    assert f["fast_p/x/NVIDIA H200"]["fast"] == {"0": 0.5, "1": 0.5, "1.5": 0.25, "2": 0.25}
    for png in ("speedup_vs_sol_distance", "score_vs_headroom", "roofline", "fast_p_x_NVIDIA_H200",
                "sol_score_x_NVIDIA_H200"):
        b = (out / "figures" / f"{png}.png").read_bytes()
        assert b[:8] == b"\x89PNG\r\n\x1a\n" and len(b) < 200_000
    html = (out / "index.html").read_text()
    assert "leaderboard: x on NVIDIA H200" in html and "<td class=l>fast</td>" in html
    assert "0.326" in html and "0.516" in html  # adjusted and raw mean SOL score of "fast"
    page = (out / "problems" / "p4.html").read_text()
    assert "REWARD_HACK" in page and "timer_patch" in page and "perf_counter" in page  # finding + evidence
    assert json.loads((out / "report.json").read_text())["traces"] == 12


def test_report_marks_legacy_and_excludes_forged(tmp_path, results):
    legacy = tmp_path / "old" / "results.jsonl"
    legacy.parent.mkdir()
    legacy.write_text(mk("q1", "q1__old", "w1").to_json_line() + "\n")
    line = json.loads(results.read_text().splitlines()[0])
    line["solution"] = "p1__forged"
    with open(results, "a") as f:
        f.write(json.dumps(line) + "\n")
    rs = load([results, legacy], quiet=True)
    assert "forged" not in {r.label for r in rs.rows}
    out = tmp_path / "rep"
    build_report(rs, out)
    html = (out / "index.html").read_text()
    assert "unauthenticated (legacy)" in html and "1 lines not written by solbench" in html


def test_terminal_formats(results):
    rs = load([results])
    md = render_terminal(rs, "markdown")
    assert "### x on NVIDIA H200" in md and "| fast | 4 | 57.1% | 2 | 1 | 1 | 0.326 | 0.516 | 0.651 | 50.0% | 50.0% | 0 | 75.0% |" in md
    js = json.loads(render_terminal(rs, "json"))
    fast = [c for c in js["leaderboards"][0]["candidates"] if c["label"] == "fast"][0]
    assert fast["hack"] == 1 and fast["workloads_hack"] == 1


def test_cli_report_results_compare(results, tmp_path):
    from typer.testing import CliRunner

    from solbench.cli import app

    run = CliRunner()
    r = run.invoke(app, ["report", str(results), "-o", str(tmp_path / "rep"), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["traces"] == 12 and (tmp_path / "rep" / "index.html").is_file()
    r = run.invoke(app, ["report", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2 and "missing.jsonl: no such results file" in r.output
    r = run.invoke(app, ["results", "query", "select label, count(*) n from traces where status = 'PASSED' "
                         "group by label order by label", str(results), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [{"label": "fast", "n": 3}, {"label": "k", "n": 3}, {"label": "slow", "n": 3},
                                    {"label": "slow_ref_only", "n": 1}]
    r = run.invoke(app, ["results", "query", "select check_name, severity from findings", str(results), "--format", "csv"])
    assert r.stdout.splitlines() == ["check_name,severity", "timer_patch,hack"]
    r = run.invoke(app, ["results", "query", "select hack, round(mean_sol_score, 6) s from candidates "
                         "where label = 'fast'", str(results), "--format", "json"])
    assert json.loads(r.stdout) == [{"hack": 1, "s": 0.325601}]
    r = run.invoke(app, ["results", "query", "select nope from traces", str(results)])
    assert r.exit_code == 2 and "query failed" in r.output
    r = run.invoke(app, ["results", "export", str(results), "-o", str(tmp_path / "exp")])
    assert r.exit_code == 0, r.output
    import pyarrow.parquet as pq
    assert pq.read_table(tmp_path / "exp" / "traces.parquet").num_rows == 12
    assert pq.read_table(tmp_path / "exp" / "workloads.parquet").num_rows == 8  # p1 w1, w2; p2, p3, p4; d1, d2, d3
    r = run.invoke(app, ["results", "verify", str(results)])
    assert r.exit_code == 0 and "verified 12" in r.stdout
    with open(results, "a") as f:
        f.write('{"definition": "forged"}\n')
    r = run.invoke(app, ["results", "verify", str(results)])
    assert r.exit_code == 1 and "line 13" in r.stdout
