"""Upstream SOL-ExecBench quirks the loader accepts with a one-line warning naming the file and
field, and `validate --strict` rejects: an input given as a workload axis (as public L2/032
gives `is_joint_block`), and workload inputs the definition lacks (as L2/068 names `bias1`,
`bias2`). Small fixtures written here reproduce each quirk."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from solbench.errors import SpecError
from solbench.spec import load_problem, reference_solution

REF_AXIS = """import torch
def get_inputs(axes_and_scalars, device):
    b, s = axes_and_scalars["batch"], axes_and_scalars["seq"]
    return {"hidden": torch.randn(b, s, 8, device=device),
            "is_joint_block": axes_and_scalars["is_joint_block"]}
def run(hidden, is_joint_block):
    return hidden * 2 if is_joint_block else hidden + 1
"""


def _axis_quirk(tmp_path):
    d = tmp_path / "axis_input"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": "axis_input", "axes": {"batch": {"type": "var"}, "seq": {"type": "var"}},
        "custom_inputs_entrypoint": "get_inputs",
        "inputs": {"hidden": {"shape": ["batch", "seq", 8], "dtype": "float32"},
                   "is_joint_block": {"shape": None, "dtype": "int32"}},
        "outputs": {"out": {"shape": ["batch", "seq", 8], "dtype": "float32"}}, "reference": REF_AXIS}))
    (d / "workload.jsonl").write_text(json.dumps({
        "uuid": "w0", "axes": {"batch": 2, "seq": 3, "is_joint_block": 1},
        "inputs": {"hidden": {"type": "custom"}}}) + "\n")
    return d


def _extra_quirk(tmp_path):
    d = tmp_path / "extra_input"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": "extra_input", "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "import torch\ndef run(x):\n    return torch.relu(x)\n"}))
    (d / "workload.jsonl").write_text(json.dumps({
        "uuid": "w0", "axes": {"n": 16}, "inputs": {"x": {"type": "random"}, "bias1": {"type": "random"},
                                                    "bias2": {"type": "random"}}}) + "\n")
    return d


def test_an_input_given_as_an_axis_loads_with_a_warning_and_strict_rejects_it(tmp_path, caplog):
    d = _axis_quirk(tmp_path)
    with caplog.at_level(logging.WARNING, logger="solbench.spec"):
        p = load_problem(d)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "workload.jsonl" in lines[0] and "line 1.axes.is_joint_block" in lines[0]
    assert p.notes and p.workloads[0].is_custom and "is_joint_block" in p.workloads[0].inputs
    env = p.definition.resolve_axes(p.workloads[0].axes)
    assert env == {"batch": 2, "seq": 3, "is_joint_block": 1}
    with pytest.raises(SpecError) as e:
        load_problem(d, strict=True)
    assert e.value.field == "line 1.axes.is_joint_block"


def test_workload_inputs_the_definition_lacks_are_dropped_with_a_warning(tmp_path, caplog):
    d = _extra_quirk(tmp_path)
    with caplog.at_level(logging.WARNING, logger="solbench.spec"):
        p = load_problem(d)
    assert set(p.workloads[0].inputs) == {"x"}
    msg = caplog.records[0].getMessage()
    assert "line 1.inputs" in msg and "bias1" in msg and "bias2" in msg
    with pytest.raises(SpecError) as e:
        load_problem(d, strict=True)
    assert e.value.field == "line 1.inputs" and "bias1" in e.value.message


def test_validate_strict_rejects_both_quirks_and_plain_validate_accepts_them(tmp_path):
    from solbench.cli import app

    a, b = _axis_quirk(tmp_path), _extra_quirk(tmp_path)
    ok = CliRunner().invoke(app, ["validate", str(a), str(b)])
    assert ok.exit_code == 0, ok.output
    assert "upstream quirk" in ok.stdout
    bad = CliRunner().invoke(app, ["validate", "--strict", str(a), str(b)])
    assert bad.exit_code == 1
    assert "2 invalid" in bad.stdout
    assert "axes.is_joint_block" in bad.stderr.replace("\n", "") and "bias1" in bad.stderr


def test_bounds_of_quirky_problems_count(tmp_path):
    from solbench.sol import bound

    p = load_problem(_axis_quirk(tmp_path))
    b = bound(p, p.workloads[0], "H200")
    assert b.bytes_fused == 2 * (2 * 3 * 8 * 4)   # hidden in, out written; the flag is a Python int
    p2 = load_problem(_extra_quirk(tmp_path))
    assert bound(p2, p2.workloads[0], "H200").bytes_fused == 2 * 16 * 4


@pytest.mark.slow
def test_quirky_problems_run_end_to_end_on_cpu(tmp_path):
    from solbench.harness import EvalConfig
    from solbench.run.session import evaluate_and_score
    from solbench.spec.trace import Status

    for d in (_axis_quirk(tmp_path), _extra_quirk(tmp_path)):
        p = load_problem(d)
        traces = evaluate_and_score(p, reference_solution(p), EvalConfig(device="cpu", timing=False))
        assert [t.evaluation.status for t in traces] == [Status.PASSED], traces[0].evaluation.log
