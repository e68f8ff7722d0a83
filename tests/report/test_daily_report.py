"""Issue 35 (items 1-4, 8) and issue 31 goal 3 on real traces: one `solbench run` on the CPU
over the bundled l1/gelu_fp32 (its cpu-tagged workload) with the two baselines that
`solbench baseline` writes and three L1/025-style candidates: an output cache (it returns a
tensor it made on an earlier call, so the harness's output slot stays unwritten), a wrong
x1.01 and an honest erf rewrite, plus the honest one again under a name full of rich
markup (``honest[v2]``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import solbench
from solbench.cli import app

# one CPU run of six candidates: 20 s on an idle 2-core machine, minutes on a loaded one
pytestmark = pytest.mark.slow

CACHE = '''import torch
import torch.nn.functional as F

_CACHE = {}


def run(x):
    key = (tuple(x.shape), x.dtype)
    out = _CACHE.get(key)
    if out is None:
        out = F.gelu(x)
        _CACHE[key] = out
    return out
'''
WRONG = "import torch.nn.functional as F\n\n\ndef run(x):\n    return F.gelu(x) * 1.01\n"
HONEST = ("import math\n\nimport torch\n\n\ndef run(x):\n"
          "    return 0.5 * x * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))\n")
LABELS = {"eager", "compile_eager", "gelu_cache", "gelu_wrong", "gelu_honest", "honest[v2]"}
CORRECT = {"eager", "compile_eager", "gelu_honest", "honest[v2]"}


def _cli(args, env, cwd, timeout=600):
    src = str(Path(solbench.__file__).resolve().parents[1])
    env = {**env, "PYTHONPATH": src + os.pathsep + env.get("PYTHONPATH", ""), "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "solbench.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def gelu_run(tmp_path_factory):
    """(workdir, env, run stdout, run --resume --json summary): baselines written by
    `solbench baseline`, the candidates beside them, one `solbench run` on the CPU."""
    wd = tmp_path_factory.mktemp("gelu_run")
    env = {**os.environ, "SOLBENCH_DATA_DIR": str(wd / "keys")}
    env.pop("SOLBENCH_TRACE_KEYS", None)
    for args in (["baseline", "l1/gelu_fp32", "--eager", "-o", "sols"],
                 ["baseline", "l1/gelu_fp32", "--compile", "--backend", "eager", "-o", "sols"]):
        r = _cli(args, env, wd)
        assert r.returncode == 0, r.stderr
    d = wd / "sols" / "gelu_fp32"
    assert sorted(p.name for p in d.iterdir()) == ["compile_eager.json", "eager.json"]
    for name, src in (("gelu_cache", CACHE), ("gelu_wrong", WRONG), ("gelu_honest", HONEST),
                      ("honest[v2]", HONEST + "\n# the same kernel under another name\n")):
        (d / f"{name}.py").write_text(src)
    r = _cli(["run", "l1", "--problem", "gelu_fp32", "--solutions", "sols", "--device", "cpu",
              "--tag", "cpu", "-o", "r.jsonl"], env, wd)
    assert r.returncode == 0, r.stdout + r.stderr
    j = _cli(["run", "l1", "--problem", "gelu_fp32", "--solutions", "sols", "--device", "cpu",
              "--tag", "cpu", "-o", "r.jsonl", "--resume", "--json"], env, wd)
    assert j.returncode == 0, j.stderr
    return wd, env, r.stdout, json.loads(j.stdout)


def _evidence(wd, label: str) -> str:
    """What the run recorded of ``label``'s trace (status, log, correctness with the misses'
    record, findings, input seeds, phases): the message of an assertion that it passed, so a
    flagged honest candidate is diagnosed from CI's output alone."""
    for line in (wd / "r.jsonl").read_text().splitlines():
        ev = json.loads(line)["evaluation"]
        if ev.get("label") == label or json.loads(line)["solution"] == label:
            keep = ("status", "log", "correctness", "findings", "input_seeds", "phases_s", "environment")
            return json.dumps({k: ev.get(k) for k in keep}, indent=1, default=str)[:20000]
    return f"no trace of {label}"


@pytest.fixture
def keys(gelu_run, monkeypatch):
    """This test reads the run's results with the run's key."""
    monkeypatch.setenv("SOLBENCH_DATA_DIR", str(gelu_run[0] / "keys"))


def _render(renderable, width: int = 250) -> str:
    c = Console(width=width, record=True, file=open(os.devnull, "w"))
    c.print(renderable)
    return c.export_text()


# --- item 3: one name for the baselines; baseline -> run round trip ------------------------
def test_baseline_run_report_compare_share_labels(gelu_run, keys):
    from solbench.report.html import report_data
    from solbench.report.records import load

    wd, env, _, summary = gelu_run
    assert summary["evaluated_now"] == 0
    assert set(summary["summary"]) - {"all"} == LABELS
    rs = load([wd / "r.jsonl"])
    assert {r.label for r in rs.rows} == LABELS
    lb = report_data(rs)["leaderboards"][0]["candidates"]
    assert {c["label"] for c in lb} == LABELS
    r = _cli(["compare", "r.jsonl", "r.jsonl", "--label-a", "eager", "--label-b", "compile_eager",
              "--format", "json"], env, wd)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["comparisons"]
    assert len(rows) == 1 and rows[0]["label"] == "eager -> compile_eager"


def test_a_label_that_matches_nothing_is_an_error_listing_the_labels(gelu_run):
    wd, env, _, _ = gelu_run
    for args in (["compare", "r.jsonl", "r.jsonl", "--label-a", "reference", "--label-b", "eager"],
                 ["compare", "r.jsonl", "r.jsonl", "--label-a", "eager", "--label-b", "torch_compile"],
                 ["report", "r.jsonl", "--label", "reference"]):
        r = _cli(args, env, wd)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        err = r.stderr.strip()
        assert err.startswith("error: ") and "no candidate labelled" in err
        assert "compile_eager, eager, gelu_cache, gelu_honest, gelu_wrong, honest[v2]" in err
    r = _cli(["report", "r.jsonl", "--label", "eager", "--format", "json"], env, wd)
    assert r.returncode == 0
    assert [c["label"] for c in json.loads(r.stdout)["leaderboards"][0]["candidates"]] == ["eager"]


# --- item 1: an incorrect or hacked unit never ranks above a correct one ---------------------
def test_failures_never_rank_above_correct_candidates(gelu_run, keys):
    from solbench.report.html import build_report, render_terminal
    from solbench.report.records import load

    wd = gelu_run[0]
    rs = load([wd / "r.jsonl"])
    data = build_report(rs, wd / "rep")
    cands = data["leaderboards"][0]["candidates"]
    order = [c["label"] for c in cands]
    # no SOL score on the CPU: correct ones first, by correct count then speedup
    assert set(order[:4]) == CORRECT and set(order[4:]) == {"gelu_cache", "gelu_wrong"}, \
        "\n".join(_evidence(wd, x) for x in CORRECT - set(order[:4]))
    assert all(c["mean_sol_score"] is None for c in cands[:4])
    sp = [c["geomean_speedup"] for c in cands[:4]]
    known = [x for x in sp if x is not None]  # None: both sides not above the run's noise floor
    assert sp == sorted(known, reverse=True) + [None] * (4 - len(known))
    text = _render(render_terminal(rs, "table")[0])
    rows = [ln for ln in text.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[2].strip() for ln in rows] == order
    html = (wd / "rep" / "index.html").read_text()
    # the speedup is named only when it was resolved (on a loaded host it may not be)
    assert f"<td>{order[0]} (1/1 correct" + (", geomean speedup" if sp[0] is not None else ")</td>") in html
    assert "gelu_cache (" not in html.split("<h2>headline</h2>")[1].split("</table>")[0]


# --- item 4: the reason of a failure where the user looks -----------------------------------
def test_failure_reason_in_run_summary_table_and_html(gelu_run, keys):
    from solbench.report.records import load
    from solbench.report.tables import trace_table

    wd, _, out, summary = gelu_run
    why = {p["label"]: p["reason"] for p in summary["problems"]}
    # the cache returns its first call's tensor again: named as such (harness/replay.py)
    assert why["gelu_cache"].startswith("REWARD_HACK: cached_output: "), why["gelu_cache"]
    assert why["gelu_wrong"].startswith("INCORRECT_NUMERICAL: tolerance: y: matched ")
    assert why["gelu_honest"] == "", _evidence(wd, "gelu_honest")
    assert why["honest[v2]"] == "", _evidence(wd, "honest[v2]")
    # the run's per-problem table shows it (folded in its "why" column)
    assert "REWARD_HACK: cached_output" in next(ln for ln in out.splitlines() if "gelu_cache" in ln)
    assert "INCORRECT_NUMERICAL: tolerance" in next(ln for ln in out.splitlines() if "gelu_wrong" in ln)
    rs = load([wd / "r.jsonl"])
    text = _render(trace_table(rs.traces))
    row = next(ln for ln in text.splitlines() if "gelu_cache" in ln).split("│")
    assert "cached_output" in row[11]
    from solbench.report.html import build_report

    build_report(rs, wd / "rep4")
    page = (wd / "rep4" / "problems" / "gelu_fp32.html").read_text()
    assert "failure log" in page and "correctness round" in page
    assert "cached_output" in page
    summ = page.split("<h2>candidates</h2>")[1].split("</table>")[0]
    assert summ.index("gelu_honest") < summ.index("gelu_cache")  # correct candidates first


# --- item 8: rich markup never eats text ------------------------------------------------------
def test_markup_in_user_text_survives_every_surface(gelu_run, keys):
    from solbench.report.html import render_terminal
    from solbench.report.records import load
    from solbench.report.tables import trace_table

    wd, env, out, _ = gelu_run
    assert "honest[v2]" in out  # run's per-problem and summary tables
    rs = load([wd / "r.jsonl"])
    assert "honest[v2]" in _render(render_terminal(rs, "table")[0])  # report's leaderboard
    assert "honest[v2]" in _render(trace_table(rs.traces))  # eval's trace table
    r = _cli(["compare", "r.jsonl", "r.jsonl"], env, wd)  # compare's table
    assert r.returncode == 0 and "honest[v2]" in r.stdout
    r = CliRunner().invoke(app, ["audit", "--solution", str(wd / "sols" / "gelu_fp32" / "gelu_cache.py")])
    assert r.exit_code == 0 and "_CACHE[key] = out" in r.stdout  # audit's findings table


# --- item 2 and issue 31 goal 3: fast_0 and speedups inside the noise ------------------------
def test_fast0_is_correct_share_and_noise_speedups_are_no_wins(gelu_run):
    _, _, out, summary = gelu_run
    for lab, s in summary["summary"].items():
        assert s["fast_p"]["0"] == s["correct_rate"], lab
    # every candidate's own counts add up: counted in fast_1 + left out = above 1 by the medians
    for lab, s in summary["summary"].items():
        if lab == "all":
            continue
        prob = next(p for p in summary["problems"] if p["label"] == lab)
        above = prob["correct"] and prob["speedup"] is not None and prob["speedup"] > 1
        assert round(s["fast_p"]["1"] * s["units"]) + s["fast_p_left_out"]["1"] == int(above), lab
