"""A correct problem with a workload that has no SOL score has no SOL score itself (its mean
would be over fewer workloads than the problem has); the report says so where the score would
be, with how many workloads and why, and changes no figure."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest

from report_fixtures import mk

import solbench.store as store
from solbench.report.aggregate import leaderboards, units, unscored_note, unscored_text
from solbench.report.html import _problem_page, build_report, render_terminal
from solbench.report.records import load, rows_from_traces
from solbench.spec.trace import Status


def _traces():
    """Candidate "fast" (T_SOL = 0.1 ms everywhere):

    * p1 w1: 1.0 -> 0.5 ms, S = 1 / (1 + 0.4 / 0.9) = 0.9 / 1.3 = 0.692308
    * p1 w2: PASSED, its SOL block has no score: the bound could not be counted (``error``)
    * p1 w3: PASSED on the CPU with a SOL block, the candidate's time 0.9 ms not above the
      run's noise floor 1.26 ms: no score
    * p2 w1: 1.2 -> 1.0 ms, S = 1.1 / 2.0 = 0.55

    p1 is correct with 2 of its 3 workloads unscored: no unit score; the candidate's mean SOL
    score is over p2 alone, 0.55 (as before: the note changes no figure)."""
    w2 = mk("p1", "p1__fast", "w2", t_k=1.0, t_ref=2.0)
    w2.evaluation.sol.score = None
    w2.evaluation.sol.error = "no count for aten::foo"
    w3 = mk("p1", "p1__fast", "w3", t_k=0.9, t_ref=5.0)
    w3.evaluation.timing.resolved, w3.evaluation.timing.resolution_ms = False, 1.26
    w3.evaluation.reference_timing.resolved = True
    w3.evaluation.sol.score, w3.evaluation.sol.unresolved = None, True
    return [mk("p1", "p1__fast", "w1", t_k=0.5, t_ref=1.0), w2, w3,
            mk("p2", "p2__fast", "w1", t_k=1.0, t_ref=1.2)]


def test_rows_units_and_leaderboard_say_why_and_keep_the_figures():
    rows, _ = rows_from_traces(_traces(), Path("results.jsonl"), labels={})
    assert [r.no_sol_score for r in rows] == ["", "SOL error", "candidate's CPU time unresolved", ""]
    assert [r.sol_score for r in rows][0] == pytest.approx(0.9 / 1.3)
    us = {u.definition: u for u in units(rows)}
    p1, p2 = us["p1"], us["p2"]
    assert p1.correct and p1.sol_score is None
    assert p1.unscored == {"SOL error": 1, "candidate's CPU time unresolved": 1}
    assert unscored_text(p1) == ("no SOL score for 2 of 3 workloads: SOL error: 1, "
                                 "candidate's CPU time unresolved: 1")
    assert p2.sol_score == pytest.approx(0.55) and p2.unscored == {} and unscored_text(p2) == ""

    (cand,) = next(iter(leaderboards(rows).values()))
    assert cand.mean_sol_score == pytest.approx(0.55) and cand.scored_problems == 1
    assert cand.unscored_problems == 1
    assert cand.unscored_workloads == {"SOL error": 1, "candidate's CPU time unresolved": 1}
    assert unscored_note([cand]) == ("fast: 1 correct problem has no SOL score, left out of its mean SOL "
                                     "score (2 workloads without one: SOL error: 1, candidate's CPU time "
                                     "unresolved: 1)")


def test_one_reason_is_named_without_a_count():
    rows, _ = rows_from_traces([mk("p1", "p1__e", "w1", t_sol=None), mk("p1", "p1__e", "w2", t_sol=None)],
                               Path("results.jsonl"), labels={})
    (u,) = units(rows)
    # no SOL block on a trace that is not from the CPU: no hardware spec was known
    assert unscored_text(u) == "no SOL score for 2 of 2 workloads: no hardware spec"
    (c,) = next(iter(leaderboards(rows).values()))
    assert unscored_note([c]) == ("e: 1 correct problem has no SOL score, left out of its mean SOL score "
                                  "(2 workloads without one: no hardware spec)")


def test_a_failed_problem_scores_zero_and_needs_no_note():
    rows, _ = rows_from_traces([mk("p1", "p1__bad", "w1", status=Status.INCORRECT_NUMERICAL),
                                mk("p1", "p1__bad", "w2", t_sol=None)], Path("results.jsonl"), labels={})
    (u,) = units(rows)
    assert u.sol_score == 0.0 and unscored_text(u) == ""
    (c,) = next(iter(leaderboards(rows).values()))
    assert c.unscored_problems == 0 and unscored_note([c]) == ""


def test_the_report_prints_it_where_the_score_would_be(tmp_path):
    p = tmp_path / "runs" / "x_0" / "results.jsonl"
    store.append_traces(p, _traces())
    rs = load([p])
    page = _problem_page("p1", [r for r in rs.rows if r.definition == "p1"], {})
    assert escape("- (no SOL score for 2 of 3 workloads: SOL error: 1, candidate's CPU time unresolved: 1)") in page
    note = ("No SOL score: fast: 1 correct problem has no SOL score, left out of its mean SOL score "
            "(2 workloads without one: SOL error: 1, candidate's CPU time unresolved: 1).")
    assert note in render_terminal(rs, "markdown")
    (t,) = render_terminal(rs, "table")
    assert str(t.caption).startswith(note)
    build_report(rs, tmp_path / "out")
    assert escape(note) in (tmp_path / "out" / "index.html").read_text()
    assert escape("- (no SOL score for 2 of 3") in (tmp_path / "out" / "problems" / "p1.html").read_text()


def test_the_traces_view_columns_in_docs_are_the_table_s():
    """docs/reports.md lists the `traces` view's columns: every TraceRow field the database
    keeps (lists of samples are not kept), in order, so a new column cannot go unlisted."""
    import dataclasses
    from pathlib import Path

    from solbench.report.records import TraceRow

    doc = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text()
    row = next(x for x in doc.splitlines() if x.startswith("| `traces` | accepted trace |"))
    listed = [c.strip() for c in row.split("|")[3].split(",")]
    kept = [f.name for f in dataclasses.fields(TraceRow) if not str(f.type).startswith("list")]
    assert listed == kept
