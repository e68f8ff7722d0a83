"""bench/sol_agreement.py: the official figures it reads from metadata.json alone, the issue's
per-subset table, and the per-problem notes file it explains differences with."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev"


def _bench():
    spec = importlib.util.spec_from_file_location("sol_agreement", ROOT / "bench" / "sol_agreement.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
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


def test_official_figures_follow_the_workloads_axes_not_only_the_index():
    """metadata.json's entries carry their workload's axes: with workload.jsonl reordered
    against it, each workload still gets the figure of the entry whose axes are its own; an
    entry for axes no workload has, or several entries for the same axes, give no figure."""
    b = _bench()
    meta = {"sol": {"per_workload": [
        {"index": 0, "axes": {"M": 8, "N": 4}, "sol_ms": 0.1},
        {"index": 1, "axes": {"M": 16, "N": 4}, "sol_ms": 0.2},
        {"index": 2, "axes": {"M": 32, "N": 4}, "sol_ms": 0.4}]}}
    off = b.official_info(meta)
    # in order: by index; the workload may give fewer keys (N is a constant axis there)
    assert [off.at(i, {"M": m})[0] for i, m in enumerate((8, 16, 32))] == [0.1, 0.2, 0.4]
    # workload.jsonl reversed: the figures follow the axes
    assert [off.at(i, {"M": m})[0] for i, m in enumerate((32, 16, 8))] == [0.4, 0.2, 0.1]
    fig, why = off.at(0, {"M": 64})
    assert fig is None and "not this workload's" in why and "0 entries match" in why
    dup = b.official_info({"sol": {"per_workload": [
        {"index": 0, "axes": {"M": 8}, "sol_ms": 0.1}, {"index": 1, "axes": {"M": 8}, "sol_ms": 0.3},
        {"index": 2, "axes": {"M": 16}, "sol_ms": 0.5}]}})
    assert dup.at(0, {"M": 8})[0] == 0.1 and dup.at(1, {"M": 8})[0] == 0.3  # agreeing at their index
    fig, why = dup.at(2, {"M": 8})  # two other entries are for M = 8: none is chosen
    assert fig is None and "2 entries match" in why
    with pytest.raises(b.MetadataError, match=r"sol.per_workload\[0\].axes: expected an object"):
        b.official_info({"sol": {"per_workload": [{"index": 0, "axes": [8], "sol_ms": 0.1}]}}, "m.json")


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
    rows[1]["uuid"] = "u-a1"
    notes = {"a": {"kind": "official", "rows": ["u-a1"]}, "c": {"kind": "source", "rows": "all"}}
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
        assert n["kind"] in b.KINDS, name
        assert n["rows"] == "all" or all(isinstance(u, str) for u in n["rows"]), name
        assert len(n["why"]) > 40, name
    if not DEV.exists():
        pytest.skip("dev set absent")
    dirs = {p.name: p for p in b.problem_dirs(DEV)}
    names = set(dirs)
    assert len(names) == 59
    dev_notes = {k for k, n in notes.items() if not n.get("beyond_dev")}
    assert dev_notes <= names, sorted(dev_notes - names)
    # every uuid a note names is a workload of its problem
    for k in dev_notes:
        if notes[k]["rows"] != "all":
            uuids = b.workload_uuids(dirs[k])
            assert set(notes[k]["rows"]) <= set(uuids), k
    # a note marked beyond the dev set names no dev problem (checked against a public copy)
    assert not (set(notes) - dev_notes) & names
    meta = json.loads((DEV / "L1" / "081_joint_attention_context_projection" / "metadata.json").read_text())
    assert len(b.official_figures(meta)) == 16


def test_malformed_sol_is_a_one_line_error_naming_file_and_field():
    b = _bench()
    where = "/d/L1/033_x/metadata.json"
    cases = [({"sol": {"per_workload": "n/a"}}, "sol.per_workload: expected a list, got str"),
             ({"sol": "unknown"}, "sol: expected an object, got str"),
             ({"sol": {"per_workload": [{"index": "zero", "sol_ms": 1.0}]}},
              "sol.per_workload[0].index: expected a non-negative integer, got str 'zero'"),
             ({"sol": {"per_workload": ["x"]}}, "sol.per_workload[0]: expected an object, got str"),
             ({"num_workloads": 1, "sol": {"per_workload": [{"index": 3, "sol_ms": 1.0}]}},
              "sol.per_workload[0].index: 3 is not below num_workloads (1)"),
             ({"num_workloads": "16", "sol": {}}, "num_workloads: expected a non-negative integer, got str '16'"),
             ([], "(top level): expected an object, got list")]
    for meta, msg in cases:
        with pytest.raises(b.MetadataError) as e:
            b.official_info(meta, where)
        assert str(e.value) == f"{where}: {msg}"
        assert "\n" not in str(e.value)


def test_missing_sol_and_rows_without_a_figure_say_why():
    b = _bench()
    off = b.official_info({"num_workloads": 2})
    assert off.figures == [None, None] and off.problem == b.NO_SOL and not off.error
    assert off.at(0) == (None, b.NO_SOL) and off.at(5) == (None, b.NO_SOL)
    off = b.official_info({"num_workloads": 5, "sol": {"per_workload": [
        {"index": 0, "sol_ms": 0.5}, {"index": 1, "sol_ms": None}, {"index": 2, "sol_ms": "n/a"},
        {"index": 3, "sol_ms": 0}]}})
    assert off.figures == [0.5, None, None, None, None] and off.problem is None
    assert [off.at(i)[1] for i in range(5)] == [
        None, "sol_ms is null", "sol_ms is not a number (str 'n/a')", "sol_ms is not a positive number (0)",
        "no entry with this index in sol.per_workload"]
    # said once per problem when it holds for every row, else with the rows it holds for
    rows = [{"index": i, "official_ms": off.at(i)[0], "official_why": off.at(i)[1]} for i in range(5)]
    assert b.missing_official(rows) == ["row 1: sol_ms is null", "row 2: sol_ms is not a number (str 'n/a')",
                                        "row 3: sol_ms is not a positive number (0)",
                                        "row 4: no entry with this index in sol.per_workload"]
    rows = [{"index": i, "official_ms": None, "official_why": b.NO_SOL} for i in range(3)]
    assert b.missing_official(rows) == [b.NO_SOL]


def test_read_official_never_raises(tmp_path):
    b = _bench()
    d = tmp_path / "L1" / "033_x"
    d.mkdir(parents=True)
    (d / "metadata.json").write_text("{not json")
    subset, off = b.read_official(d)
    assert subset == "L1" and off.error and off.figures == []
    assert off.problem.startswith(f"{d / 'metadata.json'}: not valid JSON: ")
    (d / "metadata.json").write_text(json.dumps({"subset": "Quant", "sol": {"per_workload": "n/a"}}))
    subset, off = b.read_official(d)
    assert subset == "Quant" and off.problem == f"{d / 'metadata.json'}: sol.per_workload: expected a list, got str"
    # a problem that was not counted still gets one row per workload, named by uuid
    (d / "workload.jsonl").write_text('{"uuid": "u0"}\n{"uuid": "u1"}\n')
    rows = b.uncounted_rows(d, "load: SpecError: x")
    assert [(r["index"], r["uuid"], r["official_ms"], r["error"]) for r in rows] == [
        (0, "u0", None, "load: SpecError: x"), (1, "u1", None, "load: SpecError: x")]
    assert all(r["official_error"] and r["official_why"] == off.problem for r in rows)


def test_set_aside_follows_uuids_when_workloads_are_reordered():
    b = _bench()
    notes = {"p": {"kind": "official", "rows": ["u2", "u5"]}, "q": {"kind": "model", "rows": "all"}}
    uuids = [f"u{i}" for i in range(8)]
    for order in (uuids, uuids[::-1], uuids[3:] + uuids[:3]):
        rows = [{"problem": "p", "subset": "L1", "index": i, "uuid": u, "official_ms": 1.0} for i, u in enumerate(order)]
        assert {r["uuid"] for r in rows if b.set_aside(r, notes)} == {"u2", "u5"}
    # kind "model" (another SOLAR model) is explained, not set aside
    assert not b.set_aside({"problem": "q", "index": 0, "uuid": "x"}, notes)


def test_reordered_dev_workloads_set_aside_the_same_rows():
    b = _bench()
    notes = b.load_notes(b.DEFAULT_NOTES)
    name = "020_moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
    if not DEV.exists():
        pytest.skip("dev set absent")
    (pdir,) = [p for p in b.problem_dirs(DEV) if p.name == name]
    uuids = b.workload_uuids(pdir)
    picked = {u for i, u in enumerate(uuids)
              if b.set_aside({"problem": name, "index": i, "uuid": u}, notes)}
    assert picked == {uuids[4], uuids[8], uuids[9]}
    rev = uuids[::-1]
    assert {u for i, u in enumerate(rev) if b.set_aside({"problem": name, "index": i, "uuid": u}, notes)} == picked


def test_notes_with_row_indices_are_refused(tmp_path):
    b = _bench()
    f = tmp_path / "notes.json"
    f.write_text(json.dumps({"problems": {"p": {"kind": "official", "rows": [1, 2], "why": "x"}}}))
    with pytest.raises(ValueError, match=r"problems\.p\.rows: expected \"all\" or a list of workload uuids"):
        b.load_notes(f)
    f.write_text(json.dumps({"problems": {"p": {"kind": "wrong", "rows": "all", "why": "x"}}}))
    with pytest.raises(ValueError, match=r"problems\.p\.kind"):
        b.load_notes(f)


def test_problem_without_official_is_counted_but_not_among_the_worst():
    b = _bench()
    rows = [_row("L1", "a", 0, 2.0, 1.0), _row("L1", "a", 1, 1.0, 1.0)]
    rows += [dict(_row("L1", "nosol", i, 1.0, None), official_why=b.NO_SOL) for i in range(3)]
    tab = {t["subset"]: t for t in b.subset_table(rows, "solar", {})}
    assert (tab["L1"]["workloads"], tab["L1"]["bound"], tab["L1"]["official"], tab["L1"]["compared"]) == (5, 5, 2, 2)
    probs = {p["problem"]: p for p in b.by_problem(rows, "solar")}
    assert probs["nosol"]["counted"] == 3 and probs["nosol"]["official"] == 0 and probs["nosol"]["out"] == 0
    assert [p["problem"] for p in b.worst(list(probs.values()))] == ["a"]
    md = b.render_md({"data": "D", "workloads": 5, "errors": 0, "hardware": "B200_SOLAR", "elapsed_s": 1,
                      "rows": rows, "by_problem": {m: b.by_problem(rows, m) for m in ("solar", "refined")}}, {})
    assert md.count(b.NO_SOL) == 3  # the section's line and each per-problem table's error column
    assert f"* L1/nosol (0 of 3 rows with one): {b.NO_SOL}" in md
    assert "## Worst problems (solar mode): the 15 with the most rows outside 0.9-1.1 of the official figure (1 have any)" in md


def test_a_malformed_metadata_loses_no_other_problem(tmp_path, monkeypatch, capsys):
    """End to end on a copy of a small dev problem (L1/065, two workloads) and broken copies."""
    import tempfile

    b = _bench()
    src = DEV / "L1" / "065_fused_statistics_projection_and_split"
    if not src.exists():
        pytest.skip("dev set absent")
    data = tmp_path / "data"
    meta = json.loads((src / "metadata.json").read_text())
    meta["num_workloads"] = 2
    meta["sol"]["per_workload"] = meta["sol"]["per_workload"][:2]
    wl = "".join(src.joinpath("workload.jsonl").read_text().splitlines(keepends=True)[:2])
    variants = {"good": meta, "per_na": {**meta, "sol": {**meta["sol"], "per_workload": "n/a"}},
                "sol_unknown": {**meta, "sol": "unknown"},
                "index_zero": {**meta, "sol": {**meta["sol"], "per_workload": [{"index": "zero", "sol_ms": 1}]}},
                "not_json": None, "no_sol": {k: v for k, v in meta.items() if k != "sol"},
                "row_null": {**meta, "sol": {**meta["sol"], "per_workload": [
                    meta["sol"]["per_workload"][0], {**meta["sol"]["per_workload"][1], "sol_ms": None}]}}}
    for name, m in variants.items():
        d = data / "L1" / name
        d.mkdir(parents=True)
        for f in ("definition.json",):
            (d / f).write_text((src / f).read_text())
        (d / "workload.jsonl").write_text(wl)
        (d / "metadata.json").write_text("{oops" if m is None else json.dumps(m))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    out = tmp_path / "out"
    assert b.main(["--data", str(data), "--out", str(out), "--jobs", "1"]) == 0
    assert list(tmp.iterdir()) == []  # the shard folder is cleaned up
    err = capsys.readouterr().err
    for name, msg in [("per_na", "sol.per_workload: expected a list, got str"),
                      ("sol_unknown", "sol: expected an object, got str"),
                      ("index_zero", "sol.per_workload[0].index: expected a non-negative integer, got str 'zero'")]:
        assert f"error: {data / 'L1' / name / 'metadata.json'}: {msg}\n" in err
    assert f"error: {data / 'L1' / 'not_json' / 'metadata.json'}: not valid JSON" in err
    res = json.loads((out / "sol_agreement.json").read_text())
    probs = {p["problem"]: p for p in res["by_problem"]["solar"]}
    assert set(probs) == set(variants)
    # every problem counted (metadata plays no part in counting); official figures where readable
    assert all(p["counted"] == 2 and p["error"] is None for p in probs.values())
    assert probs["good"]["official"] == 2 and probs["row_null"]["official"] == 1
    assert probs["no_sol"]["no_official"] == [b.NO_SOL] and probs["row_null"]["no_official"] == ["row 1: sol_ms is null"]
    md = (out / "sol_agreement.md").read_text()
    assert "* L1/per_na (0 of 2 rows with one): " in md and "* L1/no_sol (0 of 2 rows with one): " + b.NO_SOL in md
    tab = {t["subset"]: t for t in b.subset_table(res["rows"], "solar", {})}
    assert (tab["L1"]["workloads"], tab["L1"]["bound"], tab["L1"]["official"]) == (14, 14, 3)
