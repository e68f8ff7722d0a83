"""fast_0 is the correct share (KernelBench) and fast_p counts a speedup only beyond the run's
own noise (issue 35 item 2, issue 31 goal 3). Figures worked out by hand below."""

from __future__ import annotations

from pathlib import Path

from report_fixtures import mk

from solbench.report.aggregate import leaderboards
from solbench.report.records import rows_from_traces
from solbench.report.summary import summarize

# quartiles by linear interpolation over 5 samples are the 2nd and 4th samples:
#   in-noise pair: candidate [0.8 .. 1.2] (median 1.0, Q1 0.9, Q3 1.1), reference [0.83 .. 1.23]
#   (median 1.03, Q1 0.93, Q3 1.13): speedup 1.03, noise interval 0.93/1.1 = 0.845 .. 1.256
#   holds 1: left out of fast_1 (the old count made it a win)
#   clear pair: candidate [0.4 .. 0.6] (median 0.5, Q1 0.45, Q3 0.55), same reference: speedup
#   2.06, low end 0.93/0.55 = 1.691: in fast_1 and fast_1.5, left out of fast_2 (2.06 > 2 only
#   by its median)
CAND_NOISY = [0.8, 0.9, 1.0, 1.1, 1.2]
CAND_FAST = [0.4, 0.45, 0.5, 0.55, 0.6]
REF = [0.83, 0.93, 1.03, 1.13, 1.23]


def _traces():
    return [mk("p1", "p1__k", "w1", t_k=1.0, t_ref=1.03, samples=CAND_NOISY, ref_samples=REF, t_sol=None),
            mk("p2", "p2__k", "w1", t_k=0.5, t_ref=1.03, samples=CAND_FAST, ref_samples=REF, t_sol=None)]


def test_fast_p_counts_only_speedups_beyond_the_noise():
    s = summarize(_traces(), label_of=lambda t: "k")["k"]
    assert s.correct_rate == 1.0 and s.fast_p["0"] == 1.0
    assert s.win_rate == s.fast_p["1"] == 0.5 and s.fast_p_left_out["1"] == 1
    assert s.fast_p["1.5"] == 0.5 and s.fast_p_left_out["1.5"] == 0
    assert s.fast_p["2"] == 0.0 and s.fast_p_left_out["2"] == 1
    rows, _ = rows_from_traces(_traces(), Path("x/results.jsonl"), labels={})
    (c,) = leaderboards(rows)[("x", "NVIDIA H200")]
    assert c.fast_p["0"] == 1.0 and c.fast_p["1"] == 0.5 and c.fast_p_left_out["1"] == 1
    assert c.fast_p["2"] == 0.0 and c.fast_p_left_out["2"] == 1


def test_fast0_is_the_correct_share_when_times_are_unresolved():
    ts = _traces()
    for t in ts:  # both sides not above the run's noise floor: correct, no speedup
        for ts_ in (t.evaluation.timing, t.evaluation.reference_timing):
            ts_.resolved, ts_.resolution_ms = False, 40.0
    s = summarize(ts, label_of=lambda t: "k")["k"]
    assert s.correct_rate == 1.0 and s.fast_p["0"] == 1.0  # was 0.0: "correct 100%, fast_0 0%"
    assert s.fast_p["1"] == 0.0 and s.fast_p_left_out["1"] == 0
    rows, _ = rows_from_traces(ts, Path("x/results.jsonl"), labels={})
    (c,) = leaderboards(rows)[("x", "NVIDIA H200")]
    assert c.fast_p["0"] == 1.0 and c.fast_p["1"] == 0.0


def test_no_sol_score_ranks_correct_count_then_speedup_and_failures_last():
    """CPU-like traces (no SOL block): an output cache (INCORRECT), a hack timed at 3x and two
    honest candidates. Before, the failures' score 0 outranked the honest ones' "no score"."""
    from solbench.report.html import _top_text
    from solbench.spec.trace import Status

    ts = [mk("p1", "p1__cache", "w1", status=Status.INCORRECT_NUMERICAL),
          mk("p1", "p1__hack", "w1", status=Status.REWARD_HACK, t_k=1.0, t_ref=3.0),
          mk("p1", "p1__honest", "w1", t_k=1.0, t_ref=1.2, t_sol=None),
          mk("p1", "p1__two", "w1", t_k=1.0, t_ref=1.1, t_sol=None),
          mk("p2", "p2__two", "w1", t_k=1.0, t_ref=1.1, t_sol=None)]
    rows, _ = rows_from_traces(ts, Path("x/results.jsonl"), labels={})
    lb = leaderboards(rows)[("x", "NVIDIA H200")]
    assert [c.label for c in lb] == ["two", "honest", "cache", "hack"]
    assert _top_text(lb[0]) == "two (2/2 correct, geomean speedup 1.1x)"
    assert _top_text(lb[2]) == "none correct"


def test_a_speedup_the_paired_blocks_refused_counts_as_noise():
    """docs/harness.md, Resolved speedups: a pair whose paired-block rule refused the claim
    (``speedup_resolution.resolved`` false, e.g. on a loaded host) keeps its ratio but reports
    count it as noise. Seen in ``solbench demo`` on a loaded 2-core host: the DLRM reference
    against itself read ``6.03x !`` with IQRs apart and the claim refused. The clear pair
    (speedup 2.06, low end 1.691 by hand above) counted in fast_1 and fast_1.5 although refused;
    it must be left out of both, and its table cell marked ``~``."""
    from solbench.report.tables import speedup_text

    ts = _traces()
    ts[1].evaluation.speedup_resolution = {"resolved": False, "reason": "loaded host"}
    s = summarize(ts, label_of=lambda t: "k")["k"]
    assert s.fast_p["0"] == 1.0
    assert s.win_rate == s.fast_p["1"] == 0.0 and s.fast_p_left_out["1"] == 2
    assert s.fast_p["1.5"] == 0.0 and s.fast_p_left_out["1.5"] == 1
    rows, _ = rows_from_traces(ts, Path("x/results.jsonl"), labels={})
    (c,) = leaderboards(rows)[("x", "NVIDIA H200")]
    assert c.fast_p["1"] == 0.0 and c.fast_p_left_out["1"] == 2
    assert speedup_text(ts[1]) == "2.06x ~"
    ts[1].evaluation.speedup_resolution = {"resolved": True}
    assert speedup_text(ts[1]) == "2.06x"
    assert summarize(ts, label_of=lambda t: "k")["k"].fast_p["1.5"] == 0.5
