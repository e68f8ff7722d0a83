"""The suite a problem is reported under is its own: the definition's ``suite:`` tag, else the
folder that holds the problem (SOL-ExecBench's subset ``L1``, KernelBench's ``level1``), as the
evaluation records it in ``evaluation.suite``; never the name of the folder the results file
happens to be in (that remains the fallback for traces written before the field)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from report_fixtures import mk

import solbench.store as store
from solbench.report.aggregate import leaderboards
from solbench.report.records import load
from solbench.spec import load_problem
from solbench.suites import resolve_problem

SOLX = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "sol-execbench-dev"
SOLX_GELU = SOLX / "L1" / "025_video_latent_gelu_activation"
KB = Path(__file__).resolve().parents[1] / "adversarial" / "problems" / "kb_linear.py"


def test_problem_suite_is_its_tag_else_its_folder(tmp_path):
    relu = resolve_problem("l1/relu_fp32")
    assert load_problem(relu).suite == "l1"  # tagged suite:l1 (and in data/l1/)
    # the same problem copied into another tree keeps its tag
    shutil.copytree(relu, tmp_path / "mine" / "relu_fp32")
    assert load_problem(tmp_path / "mine" / "relu_fp32").suite == "l1"
    # without a suite: tag, the folder holding it names it (SOL-ExecBench's <subset>/<name>/)
    d = json.loads((relu / "definition.json").read_text())
    d["tags"] = [t for t in d["tags"] if not t.startswith("suite:")]
    (tmp_path / "L7" / "relu_fp32").mkdir(parents=True)
    (tmp_path / "L7" / "relu_fp32" / "definition.json").write_text(json.dumps(d))
    shutil.copy(relu / "workload.jsonl", tmp_path / "L7" / "relu_fp32" / "workload.jsonl")
    assert load_problem(tmp_path / "L7" / "relu_fp32").suite == "L7"
    # a KernelBench file: the folder it is in (level1 in KernelBench's own tree)
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    shutil.copy(KB, tmp_path / "KernelBench" / "level1" / "1_kb_linear.py")
    assert load_problem(tmp_path / "KernelBench" / "level1" / "1_kb_linear.py").suite == "level1"


@pytest.mark.skipif(not SOLX_GELU.is_dir(), reason="../shared holds no SOL-ExecBench development dataset")
def test_a_sol_execbench_problem_is_in_its_subset():
    assert load_problem(SOLX_GELU).suite == "L1"
    assert load_problem(SOLX / "L2" / "011_moe_sparse_routing_and_dispatch_backward").suite == "L2"


def test_the_report_groups_by_the_recorded_suite_and_falls_back_on_old_traces(tmp_path):
    new = mk("025_video_latent_gelu_activation", "g__eager", "w1")
    new.evaluation.suite = "L1"
    old = mk("p_old", "p_old__eager", "w1")  # written before evaluation.suite
    p = tmp_path / "myrun_2026" / "results.jsonl"
    store.append_traces(p, [new, old])
    rows = load([p]).rows
    assert [(r.definition, r.suite) for r in rows] == [("025_video_latent_gelu_activation", "L1"),
                                                      ("p_old", "myrun")]
    assert sorted(leaderboards(rows)) == [("L1", "NVIDIA H200"), ("myrun", "NVIDIA H200")]
    # read back from the signed line, the field is kept
    assert json.loads(p.read_text().splitlines()[0])["evaluation"]["suite"] == "L1"
