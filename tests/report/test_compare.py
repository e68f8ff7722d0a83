"""`solbench compare`: the Mann-Whitney U test by hand and against SciPy, and the verdicts."""

from __future__ import annotations

import json
import math
import random

import pytest

from report_fixtures import mk

import solbench.store as store
from solbench.report.compare import compare, mann_whitney_u
from solbench.report.records import load
from solbench.spec.trace import Status


def test_mann_whitney_by_hand():
    # a entirely below b: U_a = 0; mu = 4.5, var = 3*3/12*7 = 5.25; z = (4.5 - 0.5)/sqrt(5.25)
    u, p = mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert u == 0.0
    assert p == pytest.approx(math.erfc(4 / math.sqrt(5.25) / math.sqrt(2)))
    assert p == pytest.approx(0.080856, abs=1e-6)
    # ties: every value equal -> no evidence
    assert mann_whitney_u([1, 1, 1], [1, 1]) == (3.0, 1.0)


def test_mann_whitney_matches_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    for _ in range(5):
        a = [round(rng.gauss(1.0, 0.05), 3) for _ in range(rng.randint(5, 60))]
        b = [round(rng.gauss(1.02, 0.05), 3) for _ in range(rng.randint(5, 60))]
        u, p = mann_whitney_u(a, b)
        ref = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
        assert u == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue, rel=1e-9)


def _pair(tmp_path, a_traces, b_traces):
    pa, pb = tmp_path / "a" / "r.jsonl", tmp_path / "b" / "r.jsonl"
    store.append_traces(pa, a_traces)
    store._RUNS.clear()
    store.append_traces(pb, b_traces)
    return pa, pb


def test_verdicts(tmp_path):
    rng = random.Random(3)
    base = [1.0 + rng.gauss(0, 0.01) for _ in range(40)]
    same = [1.0 + rng.gauss(0, 0.01) for _ in range(40)]
    fast = [0.8 + rng.gauss(0, 0.01) for _ in range(40)]
    tiny = [0.995 + rng.gauss(0, 0.001) for _ in range(40)]  # significant, but a 0.5% shift
    a = [mk("p", "p__k", "w1", samples=base, t_k=1.0), mk("p", "p__k", "w2", samples=base, t_k=1.0),
         mk("p", "p__k", "w3", samples=base, t_k=1.0), mk("p", "p__k", "w4", samples=[1.0], t_k=1.0),
         mk("p", "p__k", "w5", samples=base, t_k=1.0), mk("p", "p__k", "w6", samples=[1.0] * 40, t_k=1.0)]
    b = [mk("p", "p__k", "w1", samples=same, t_k=1.0), mk("p", "p__k", "w2", samples=fast, t_k=0.8),
         mk("p", "p__k", "w3", samples=tiny, t_k=0.995), mk("p", "p__k", "w4", samples=[1.1], t_k=1.1),
         mk("p", "p__k", "w5", status=Status.REWARD_HACK), mk("p", "p__k", "w7")]
    pa, pb = _pair(tmp_path, a, b)
    cs = {c.workload: c for c in compare(load([pa]), load([pb]))}
    assert cs["w1"].verdict == "same" and cs["w1"].statistic == "mann-whitney-u"
    assert cs["w2"].verdict == "faster" and cs["w2"].p_value < 1e-10
    assert cs["w2"].ratio == pytest.approx(sorted(fast)[19:21][0] / 1.0, rel=0.05)
    assert cs["w3"].verdict == "same" and cs["w3"].p_value < 0.01  # below the 2% threshold
    assert cs["w4"].statistic == "ratio-of-medians" and cs["w4"].verdict == "slower"
    assert cs["w4"].ratio == pytest.approx(1.1)
    assert cs["w5"].verdict == "status" and cs["w5"].status_b == "REWARD_HACK"
    assert cs["w6"].verdict == "only in A" and cs["w7"].verdict == "only in B"


def test_cli_compare(tmp_path):
    from typer.testing import CliRunner

    from solbench.cli import app

    a = [mk("p", "p__eager", "w1", samples=[1.0, 1.01, 0.99, 1.03, 1.02], t_k=1.0),
         mk("p", "p__compile", "w1", samples=[0.5, 0.51, 0.49, 0.53, 0.52], t_k=0.5)]
    pa, _ = _pair(tmp_path, a, a)
    args = ["compare", str(pa), str(pa), "--label-a", "eager", "--label-b", "compile", "--format", "json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    (c,) = json.loads(r.stdout)["comparisons"]
    # 5 vs 5 fully separated: U = 25 (all of A above B); p = erfc((12.5 - 0.5)/sqrt(25/12*11)/sqrt 2)
    # = 0.0122: not significant at the default alpha 0.01 (5 samples a side cannot get there)
    assert c["label"] == "eager -> compile" and c["verdict"] == "same"
    assert c["p_value"] == pytest.approx(math.erfc(12 / math.sqrt(25 / 12 * 11) / math.sqrt(2)))
    assert c["p_value"] == pytest.approx(0.01219, abs=1e-5)
    (c,) = json.loads(CliRunner().invoke(app, args + ["--alpha", "0.05"]).stdout)["comparisons"]
    assert c["verdict"] == "faster" and c["ratio"] == pytest.approx(0.51 / 1.01)  # medians of the samples
    r = CliRunner().invoke(app, ["compare", str(pa), str(pa)])
    assert r.exit_code == 0 and "same 2" in r.stdout and "Mann-Whitney U" in r.stdout
