"""bench/sol_agreement.py: the official figures it reads from metadata.json alone, the issue's
per-subset table, and the per-problem notes file it explains differences with."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev"


def _bench():
    spec = importlib.util.spec_from_file_location("sol_agreement", ROOT / "bench" / "sol_agreement.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_official_figures_come_from_metadata_alone():
    b = _bench()
    meta = {"num_workloads": 3, "sol": {"available": True, "per_workload": [
        {"index": 2, "sol_ms": 0.5}, {"index": 0, "sol_ms": 0.25}, {"index": 1, "sol_ms": 0}]}}
    # by index, not by position; a non-positive figure is no figure
    assert b.official_figures(meta) == [0.25, None, 0.5]
    assert b.official_figures({"num_workloads": 2, "sol": {"available": True, "sol_is_dummy": True,
                                                             "per_workload": []}}) == [None, None]
    assert b.official_figures({"num_workloads": 1, "sol": {"available": False}}) == [None]


def _row(sub, prob, i, ours, off):
    r = {"subset": sub, "problem": prob, "index": i, "official_ms": off}
    if ours is not None:
        r["solar"] = {"sol_ms": ours, "bottleneck": "dram"}
    return r


def test_subset_table_counts_bounds_band_and_set_aside_rows():
    b = _bench()
    rows = [_row("L1", "a", 0, 1.0, 1.0), _row("L1", "a", 1, 2.0, 1.0), _row("L1", "b", 0, 1.05, 1.0),
            _row("L1", "b", 1, None, 1.0),  # no bound (counting failed)
            _row("Q", "c", 0, 0.5, 1.0)]
    notes = {"a": {"kind": "official", "rows": [1]}, "c": {"kind": "source", "rows": "all"}}
    tab = {t["subset"]: t for t in b.subset_table(rows, "solar", notes)}
    # L1: 4 workloads, 3 with a bound; ratios 1.0, 2.0, 1.05 -> 2 of 3 within 0.9-1.1, median 1.05;
    # row a/1 set aside (kind official) -> 2 of 2; c is a "source" note: not set aside
    assert (tab["L1"]["workloads"], tab["L1"]["bound"]) == (4, 3)
    assert tab["L1"]["within"] == pytest.approx(2 / 3) and tab["L1"]["median"] == pytest.approx(1.05)
    assert tab["L1"]["set_aside"] == 1 and tab["L1"]["within_kept"] == 1.0
    assert tab["Q"]["within"] == 0.0 and tab["Q"]["set_aside"] == 0
    assert (tab["all"]["workloads"], tab["all"]["bound"]) == (5, 4)
    assert tab["all"]["within"] == pytest.approx(2 / 4)
    # worst: one workload out each (b's unbounded one counts as out), then the median furthest
    # from 1 in log terms: c (0.5), a (1.5), b (1.05)
    probs = b.by_problem(rows, "solar")
    assert [p["problem"] for p in b.worst(probs)] == ["c", "a", "b"]


def test_notes_file_is_well_formed_and_names_dev_problems():
    b = _bench()
    notes = b.load_notes(b.DEFAULT_NOTES)
    assert notes
    for name, n in notes.items():
        assert n["kind"] in ("official", "source", "ours", "rounding"), name
        assert n["rows"] == "all" or all(isinstance(i, int) for i in n["rows"]), name
        assert len(n["why"]) > 40, name
    if not DEV.exists():
        pytest.skip("dev set absent")
    names = {p.name for p in b.problem_dirs(DEV)}
    assert len(names) == 59
    dev_notes = {k for k, n in notes.items() if not n.get("beyond_dev")}
    assert dev_notes <= names, sorted(dev_notes - names)
    # a note marked beyond the dev set names no dev problem (checked against a public copy)
    assert not (set(notes) - dev_notes) & names
    meta = json.loads((DEV / "L1" / "081_joint_attention_context_projection" / "metadata.json").read_text())
    assert len(b.official_figures(meta)) == 16
