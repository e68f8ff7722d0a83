"""Amdahl maths against hand-worked numbers, the problem map, and `solbench project`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from solbench.errors import SpecError
from solbench.profile.amdahl import (amdahl_time_saved, end_to_end_speedup, entry_for, load_problem_map,
                                     problem_results, project, study_projection)

SUITE_DLRM = Path(__file__).resolve().parents[2] / "src" / "solbench" / "suites" / "data" / "dlrm"


def test_study_headline_number():
    # the study: 0.582 x 0.417 x (1 - 1/1.552) = 8.63 %
    g = study_projection(0.582, 0.417, 1.552)
    assert g == pytest.approx(0.582 * 0.417 * (1 - 1 / 1.552))
    assert g == pytest.approx(0.086319, abs=1e-6)
    assert round(100 * g, 2) == 8.63
    assert study_projection(0.5, 0.0, 0.0) == 0.0


def test_amdahl_by_hand():
    # 30 % of the step sped up 2x, 20 % sped up 1.25x: saves 0.15 + 0.04 = 0.19 -> 1/0.81
    saved = amdahl_time_saved([0.3, 0.2], [2.0, 1.25])
    assert saved == pytest.approx(0.19)
    assert end_to_end_speedup(saved) == pytest.approx(1 / 0.81)
    # a kernel made infinitely fast removes exactly its share
    assert amdahl_time_saved([0.4], [1e12]) == pytest.approx(0.4)
    # 1x saves nothing
    assert amdahl_time_saved([0.9], [1.0]) == 0.0
    with pytest.raises(ValueError):
        amdahl_time_saved([0.7, 0.6], [2, 2])
    with pytest.raises(ValueError):
        amdahl_time_saved([0.1], [0.0])
    with pytest.raises(ValueError):
        end_to_end_speedup(1.0)


def _trace(defn, sol, wl, speedup=None, status="PASSED"):
    ev = {"status": status, "environment": {"hardware": "H200"}, "correctness": {}}
    if status == "PASSED":
        ev["performance"] = {"latency_ms": 1.0, "reference_latency_ms": speedup, "speedup_factor": speedup}
    else:
        ev["correctness"] = {"max_relative_error": 1.0}
    return {"definition": defn, "solution": sol, "workload": {"uuid": wl, "axes": {}, "inputs": {}}, "evaluation": ev}


TRACES = [
    # dlrm01: A = (2.0, 0.5) -> clamped geomean sqrt(2) = 1.414; B = (1.5, 1.5) -> 1.5 (best, won)
    _trace("dlrm01_embedding_bag_sum_fp32", "A", "w1", 2.0), _trace("dlrm01_embedding_bag_sum_fp32", "A", "w2", 0.5),
    _trace("dlrm01_embedding_bag_sum_fp32", "B", "w1", 1.5), _trace("dlrm01_embedding_bag_sum_fp32", "B", "w2", 1.5),
    # dlrm02: 3x on one workload, incorrect on the other -> no correct solution: 1x, not won
    _trace("dlrm02_tbe_forward_fp32", "C", "w1", 3.0),
    _trace("dlrm02_tbe_forward_fp32", "C", "w2", status="INCORRECT_NUMERICAL"),
    # dlrm03: loses (0.8) -> counts 1x, not won
    _trace("dlrm03_embedding_bag_backward_dense", "D", "w1", 0.8),
    # a problem the map does not know: counts for the win rate, not for Amdahl
    _trace("some_other_problem", "E", "w1", 2.0),
]

PROFILE = {
    "workload": "dlrm-kaggle", "mode": "train", "scale": "full", "device": "cuda", "device_name": "H200",
    "wall_ms": 10.0,
    "addressable_fraction": {"strict_busy": 0.6, "strict_wall": 0.5, "loose_busy": 0.6, "loose_wall": 0.5},
    "kernel_table": [
        {"kernel": "EmbeddingBag_updateOutputKernel_sum_mean", "op": "aten::_embedding_bag",
         "ops": ["aten::_embedding_bag", "aten::embedding_bag"], "phase": "forward",
         "tags": ["solbench::embedding_tables"], "cls": "framework_native", "subclass": "embedding", "share_wall": 0.30},
        {"kernel": "compute_grad_weight_bags", "op": "aten::_embedding_bag_dense_backward",
         "ops": ["aten::_embedding_bag_dense_backward", "aten::_embedding_bag_backward"], "phase": "backward",
         "tags": ["EmbeddingBagBackward0"], "cls": "framework_native", "subclass": "embedding", "share_wall": 0.10},
        {"kernel": "nvjet_x", "op": "aten::bmm", "ops": ["aten::bmm"], "phase": "forward",
         "tags": ["solbench::dot_interaction"], "cls": "gemm", "subclass": "", "share_wall": 0.05},
        {"kernel": "nvjet_y", "op": "aten::addmm", "ops": ["aten::addmm", "aten::linear"], "phase": "forward",
         "tags": ["solbench::linear_relu_k512"], "cls": "gemm", "subclass": "", "share_wall": 0.20},
    ],
}


def test_problem_results_rules():
    r = problem_results(TRACES)
    assert r["dlrm01_embedding_bag_sum_fp32"].best_solution == "B"
    assert r["dlrm01_embedding_bag_sum_fp32"].speedup == pytest.approx(1.5)
    assert r["dlrm01_embedding_bag_sum_fp32"].solutions["A"] == pytest.approx(1.0)  # raw geomean of 2 and 0.5
    assert r["dlrm01_embedding_bag_sum_fp32"].won
    # an INCORRECT_NUMERICAL workload disqualifies C: never the "best solution"
    assert r["dlrm02_tbe_forward_fp32"].best_solution is None
    assert r["dlrm02_tbe_forward_fp32"].speedup == 1.0
    assert r["dlrm02_tbe_forward_fp32"].solutions["C"] == pytest.approx(math.sqrt(3))
    assert r["dlrm02_tbe_forward_fp32"].correct_solutions == []
    assert not r["dlrm02_tbe_forward_fp32"].won and r["dlrm02_tbe_forward_fp32"].passed == 1
    assert r["dlrm03_embedding_bag_backward_dense"].speedup == 1.0
    assert not r["dlrm03_embedding_bag_backward_dense"].won


def test_projection_by_hand():
    res = project(PROFILE, TRACES)
    rows = {r["problem"]: r for r in res["problems"]}
    # group 0 is claimed by dlrm01 (op) and dlrm02 (tag): it goes to the faster correct one,
    # dlrm01 (1.5; dlrm02 has no correct solution, 1x)
    assert rows["dlrm01_embedding_bag_sum_fp32"]["share_wall"] == pytest.approx(0.30)
    assert rows["dlrm02_tbe_forward_fp32"]["share_wall"] == 0.0
    assert rows["dlrm02_tbe_forward_fp32"]["best_solution"] is None
    assert rows["dlrm01_embedding_bag_sum_fp32"]["kernel_groups_claimed"] == 1
    assert rows["dlrm03_embedding_bag_backward_dense"]["share_wall"] == pytest.approx(0.10)
    assert res["unmapped"] == ["some_other_problem"]
    a = res["amdahl_mapped"]
    saved = 0.30 * (1 - 1 / 1.5)  # = 0.1; dlrm02 and dlrm03 at 1x save nothing
    assert a["time_saved"] == pytest.approx(saved)
    assert a["time_saved"] == pytest.approx(0.1, abs=1e-9)
    assert a["end_to_end_speedup"] == pytest.approx(1 / (1 - saved))
    assert a["share_wall_mapped"] == pytest.approx(0.40)
    s = res["study_simple"]
    # won: dlrm01 (1.5) and some_other_problem (2.0) of 4 -> 0.5; median 1.75
    assert s["win_rate"] == 0.5 and s["median_speedup"] == pytest.approx(1.75)
    assert s["gain"] == pytest.approx(0.5 * 0.5 * (1 - 1 / 1.75))
    assert s["gain"] == pytest.approx(0.107143, abs=1e-6)


def test_map_entries_for_every_dlrm_bench_problem():
    entries = load_problem_map()
    expected_prefix = {f"dlrm{i:02d}": i for i in range(1, 13)}
    names = [p.name for p in SUITE_DLRM.iterdir() if p.is_dir()] if SUITE_DLRM.is_dir() else []
    names = names or ["dlrm01_embedding_bag_sum_fp32", "dlrm02_tbe_forward_bf16", "dlrm03_embedding_bag_backward_dense",
                      "dlrm04_sparse_grad_coalesce", "dlrm05_sparse_sgd_update", "dlrm06_dot_interaction_forward_fp32",
                      "dlrm07_dot_interaction_backward_fp32", "dlrm08_dcnv2_cross_layer_fp32",
                      "dlrm09_small_k_linear_relu_fp32", "dlrm10_jagged_to_padded_fp32",
                      "dlrm11_jagged_softmax_fp32", "dlrm12_kjt_preprocess"]
    seen = set()
    for n in names:
        e = entry_for(n, entries)
        assert e is not None, n
        assert e.id.startswith(n[:6]), (n, e.id)  # dlrmNN problem -> dlrmNN entry
        seen.add(expected_prefix[n[:6]])
    assert seen == set(range(1, 13))
    assert entry_for("softmax_bf16", entries).id == "l1-softmax"
    assert entry_for("log_softmax_fp32", entries).id == "l1-log-softmax"
    assert entry_for("matmul_square_fp32", entries) is None


def test_bad_map_is_a_spec_error(tmp_path):
    p = tmp_path / "map.json"
    p.write_text(json.dumps({"entries": [{"id": "x", "match": ["a*"], "replaces": [{"opz": ["aten::mm"]}]}]}))
    with pytest.raises(SpecError, match=r"entries\[0\]\.replaces\[0\]"):
        load_problem_map(p)
    p.write_text("{not json")
    with pytest.raises(SpecError, match="invalid JSON"):
        load_problem_map(p)


# ---- CLI
def _runner():
    from typer.testing import CliRunner

    from solbench.cli import app

    return CliRunner(), app


def _write(tmp_path, profile=PROFILE, traces=TRACES):
    from solbench.profile.pipeline import ProfileReport

    full = {**profile, "classified_by": "kernel name", "wall_samples_ms": [10.0] * 20, "busy_ms": 9.0,
            "kernel_sum_ms": 9.0, "busy_over_wall": 0.9, "launch_bound": False, "classes": {}, "subclasses": {},
            "ops": [], "top_kernels": [], "config": {}, "precision": {}, "steps": {"warmup": 3, "wall": 20, "active": 3},
            "environment": {}}
    full["kernel_table"] = [{**g, "top_op": g["ops"][-1], "ms": g["share_wall"] * 10, "share_busy": g["share_wall"],
                             "count": 1.0} for g in profile["kernel_table"]]
    ProfileReport.model_validate(full)
    pp = tmp_path / "profile.json"
    pp.write_text(json.dumps(full))
    rp = tmp_path / "results.jsonl"
    rp.write_text("\n".join(json.dumps(t) for t in traces) + "\n")
    return pp, rp


def test_cli_project_json(tmp_path):
    runner, app = _runner()
    pp, rp = _write(tmp_path)
    res = runner.invoke(app, ["project", str(pp), str(rp), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["amdahl_mapped"]["time_saved"] == pytest.approx(0.30 * (1 - 1 / 1.5))
    assert out["study_simple"]["name"] == "study_simple"
    # human output names both projections
    res = runner.invoke(app, ["project", str(pp), str(rp)])
    assert res.exit_code == 0 and "amdahl_mapped" in res.stdout and "study_simple" in res.stdout


def test_cli_project_bundle_and_errors(tmp_path):
    runner, app = _runner()
    pp, rp = _write(tmp_path)
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({"reports": [json.loads(pp.read_text())]}))
    res = runner.invoke(app, ["project", str(bundle), str(rp), "--json", "--workload", "dlrm-kaggle", "--mode", "train"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["project", str(bundle), str(rp), "--workload", "resnet50"])
    assert res.exit_code == 2 and "0 reports match" in res.output and "Traceback" not in res.output
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"workload": "x"}))
    res = runner.invoke(app, ["project", str(bad), str(rp)])
    assert res.exit_code == 2 and "bad.json" in res.output and "not a solbench profile" in res.output
    badr = tmp_path / "bad.jsonl"
    badr.write_text('{"definition": "x"}\n')
    res = runner.invoke(app, ["project", str(pp), str(badr)])
    assert res.exit_code == 2 and "bad.jsonl: line 1" in res.output and "Traceback" not in res.output


RECORDED = Path(__file__).resolve().parents[2] / "bench" / "results" / "profile_recommendation.json"


@pytest.mark.skipif(not RECORDED.is_file(), reason="no recorded H200 profile bundle in bench/results/")
def test_project_on_the_recorded_h200_bundle():
    """The device script's bundle (with its extra run_s field) loads as profiles, and the
    projection on it follows the Amdahl rule from the per-problem wall shares."""
    from solbench.cli.project import load_profile

    prof = load_profile(RECORDED, "dlrm-v2", "train")
    assert prof["device_name"] == "NVIDIA H200" and prof["run_s"] > 0
    res = project(prof, TRACES)
    rows = {r["problem"]: r for r in res["problems"]}
    p1 = rows["dlrm01_embedding_bag_sum_fp32"]["share_wall"]
    p2 = rows["dlrm02_tbe_forward_fp32"]["share_wall"]  # groups only dlrm02 claims
    p3 = rows["dlrm03_embedding_bag_backward_dense"]["share_wall"]
    # the forward embedding kernels exist in dlrm-v2 training and go to dlrm01 (dlrm02's only
    # solution is incorrect on one workload: 1x)
    assert p1 > 0.01 and rows["dlrm02_tbe_forward_fp32"]["time_saved"] == 0.0
    saved = p1 * (1 - 1 / 1.5)  # dlrm02 (no correct solution) and dlrm03 (0.8x) count 1x
    assert res["amdahl_mapped"]["time_saved"] == pytest.approx(saved)
    assert res["amdahl_mapped"]["share_wall_mapped"] == pytest.approx(p1 + p2 + p3)
    s = res["study_simple"]
    assert s["gain"] == pytest.approx(prof["addressable_fraction"]["strict_wall"] * 0.5 * (1 - 1 / 1.75))


def test_cli_project_nothing_won(tmp_path):
    """Only incorrect or losing candidates: no best solution, no '1/0.000' formula."""
    runner, app = _runner()
    traces = [_trace("dlrm02_tbe_forward_fp32", "C", "w1", 3.0),
              _trace("dlrm02_tbe_forward_fp32", "C", "w2", status="INCORRECT_NUMERICAL"),
              _trace("dlrm03_embedding_bag_backward_dense", "D", "w1", 0.8)]
    pp, rp = _write(tmp_path, traces=traces)
    res = runner.invoke(app, ["project", str(pp), str(rp), "--json"])
    out = json.loads(res.stdout)
    assert out["study_simple"]["median_speedup"] is None and out["study_simple"]["gain"] == 0.0
    assert out["amdahl_mapped"]["time_saved"] == 0.0
    assert {r["problem"]: r["best_solution"] for r in out["problems"]}["dlrm02_tbe_forward_fp32"] is None
    res = runner.invoke(app, ["project", str(pp), str(rp)])
    assert res.exit_code == 0, res.output
    assert "1/0.000" not in res.stdout and "nothing won" in res.stdout
