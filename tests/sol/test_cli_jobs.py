"""`solbench sol --jobs`: worker processes only when asked or for a large run, and the same
output as one process, in the same order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.cli.sol import AUTO_POOL_MIN_PROBLEMS, auto_jobs

ADD = """import torch
def run(x):
    return x + SCALE
"""


def _problem(root: Path, name: str, scale: float, ns=(64, 1024)) -> Path:
    d = root / name
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": name, "axes": {"N": {"type": "var"}}, "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N"], "dtype": "float32"}}, "reference": ADD.replace("SCALE", str(scale))}))
    (d / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"w{n}", "axes": {"N": n}, "inputs": {"x": {"type": "random"}}}) + "\n" for n in ns))
    return d


def test_auto_jobs_uses_this_process_for_a_small_run():
    assert auto_jobs(0, 1, 8) == 1
    assert auto_jobs(0, AUTO_POOL_MIN_PROBLEMS - 1, 8) == 1
    assert auto_jobs(0, AUTO_POOL_MIN_PROBLEMS, 2) == 2
    assert auto_jobs(0, 59, 8) == 8
    assert auto_jobs(0, 59, None) == 1
    assert auto_jobs(1, 59, 8) == 1
    assert auto_jobs(4, 2, 8) == 2  # never more workers than problems
    with pytest.raises(ValueError):
        auto_jobs(-1, 3, 2)


def test_jobs_2_prints_what_one_process_prints_in_the_same_order(tmp_path):
    from solbench.cli import app

    dirs = [_problem(tmp_path, "a", 1.0), _problem(tmp_path, "b", 2.0, ns=(8,)), _problem(tmp_path, "c", 3.0)]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "definition.json").write_text("{not json")
    (broken / "workload.jsonl").write_text("")
    args = ["sol", str(dirs[0]), str(broken), str(dirs[1]), str(dirs[2]), "--json"]
    one = CliRunner().invoke(app, args + ["--jobs", "1"])
    two = CliRunner().invoke(app, args + ["--jobs", "2"])
    assert one.exit_code == two.exit_code == 1  # the broken problem is reported, the rest go on
    lines1 = [json.loads(x) for x in one.stdout.splitlines() if x.startswith("{")]
    lines2 = [json.loads(x) for x in two.stdout.splitlines() if x.startswith("{")]
    assert [x["problem"] for x in lines1] == ["a", str(broken), "b", "c"]
    assert lines1 == lines2
    # hand-worked: N fp32 read + N written = 8N bytes, N adds
    assert [w["bytes"]["fused"] for w in lines2[0]["workloads"]] == [8 * 64, 8 * 1024]
    assert "error" in lines2[1] and lines2[1]["workloads"] == []


def test_negative_jobs_is_a_one_line_error(tmp_path):
    from solbench.cli import app

    res = CliRunner().invoke(app, ["sol", str(_problem(tmp_path, "a", 1.0)), "--jobs", "-1"])
    assert res.exit_code == 2 and "--jobs" in res.output and "Traceback" not in res.output


def test_workers_get_the_value_reading_and_larger_problems_first(tmp_path):
    from solbench.cli.sol import VALUE_READ_WEIGHT, estimated_cost, schedule_order

    small = _problem(tmp_path, "small", 1.0, ns=(8,))                 # 1 workload
    large = _problem(tmp_path, "large", 1.0, ns=(8, 16, 32))          # 3 workloads
    reads = _problem(tmp_path, "reads", 1.0, ns=(8, 16))              # 2 workloads, reads values
    defn = json.loads((reads / "definition.json").read_text())
    defn["reference"] = "import torch\ndef run(x):\n    return x + x.sum().item()\n"
    (reads / "definition.json").write_text(json.dumps(defn))
    missing = tmp_path / "kb_model.py"                               # no problem directory: cost 1
    assert [estimated_cost(p) for p in (small, large, reads, missing)] == [1.0, 3.0, 2.0 * VALUE_READ_WEIGHT, 1.0]
    # reads (2 x weight) > large (3) > small (1) = missing (1, after small: argument order)
    assert schedule_order([small, large, reads, missing]) == [2, 1, 0, 3]


def test_the_default_hardware_is_said_and_a_named_one_is_not(tmp_path):
    from solbench.cli import app

    d = str(_problem(tmp_path, "a", 1.0, ns=(64,)))
    dflt = CliRunner().invoke(app, ["sol", d, "--json"])
    named = CliRunner().invoke(app, ["sol", d, "--json", "--hardware", "H200"])
    assert dflt.exit_code == named.exit_code == 0
    assert "no --hardware given: T_SOL on H200" in dflt.stderr
    assert "no --hardware given" not in named.stderr
    # the same bound either way, and stdout stays one JSON object a problem
    assert json.loads(dflt.stdout) == json.loads(named.stdout)
