"""``solbench eval`` from the command line: exit codes, strict JSON on stdout, traces
appended as JSON lines, one clean line for bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.cli import app
from solbench.spec import Status, Trace

DEF = {
    "name": "scale_add",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"},
               "alpha": {"shape": None, "dtype": "float32"}},
    "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, y, alpha):\n    return alpha * x + y\n",
}
WORKLOADS = [
    {"uuid": "a0000000-0000-0000-0000-000000000001", "axes": {"n": 64},
     "inputs": {"x": {"type": "random"}, "y": {"type": "random"}, "alpha": {"type": "scalar", "value": 0.5}}},
    {"uuid": "b0000000-0000-0000-0000-000000000002", "axes": {"n": 1000},
     "inputs": {"x": {"type": "random"}, "y": {"type": "random"}, "alpha": {"type": "scalar", "value": -2.0}},
     "tolerance": {"max_atol": 1e-5, "max_rtol": 1e-5, "required_match_ratio": 1.0}},
]

KB_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.tanh(a) * b


def get_inputs():
    return [torch.randn(4, 32), torch.randn(4, 32)]


def get_init_inputs():
    return []
'''
KB_WRONG = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a * b  # forgot the tanh
'''


def _strict(text: str):
    def bad(x):
        raise ValueError(f"non-strict JSON constant {x}")

    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    p = d / "scale_add"
    p.mkdir()
    (p / "definition.json").write_text(json.dumps(DEF))
    (p / "workload.jsonl").write_text("\n".join(json.dumps(w) for w in WORKLOADS) + "\n")
    (d / "kb_tanh_mul.py").write_text(KB_PROBLEM)
    (d / "kb_wrong.py").write_text(KB_WRONG)
    cache = d / "cache"
    cache.mkdir()
    return {"problem": p, "kb": d / "kb_tanh_mul.py", "kb_wrong": d / "kb_wrong.py",
            "traces": d / "out" / "traces.jsonl", "dir": d, "cache": cache}


@pytest.fixture(scope="module")
def reference_run(files):
    """``solbench eval PROBLEM --json -o traces.jsonl`` as a real process: stdout must be
    nothing but the JSON document."""
    env = {**os.environ, "SOLBENCH_CACHE": str(files["cache"])}
    src = Path(__file__).resolve().parents[2] / "src"
    env["PYTHONPATH"] = os.pathsep.join([str(src)] + [x for x in [env.get("PYTHONPATH")] if x])
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from solbench.cli import main; sys.argv[0] = 'solbench'; main()", "eval", str(files["problem"]), "--device", "cpu",
         "--json", "-o", str(files["traces"]), "--rounds", "5", "--iters", "3"],
        capture_output=True, text=True, env=env, timeout=600)
    return proc


def test_eval_reference_exit_0_and_strict_json(reference_run, files):
    assert reference_run.returncode == 0, reference_run.stderr[-3000:]
    doc = _strict(reference_run.stdout)
    assert isinstance(doc, list) and len(doc) == 2
    assert [t["workload"]["uuid"] for t in doc] == [w["uuid"] for w in WORKLOADS]
    for t in doc:
        assert t["evaluation"]["status"] == "PASSED"
        assert t["solution"] == "scale_add__reference" and t["definition"] == "scale_add"
        assert t["evaluation"]["timing"]["n_samples"] == 3
        assert t["evaluation"]["performance"]["latency_ms"] > 0
        Trace.model_validate(t)


def test_eval_appends_traces_and_failing_candidate_exits_1(reference_run, files):
    assert reference_run.returncode == 0
    lines = files["traces"].read_text().splitlines()
    assert len(lines) == 2
    first = [Trace.from_json_line(x) for x in lines]
    assert all(t.evaluation.status == Status.PASSED for t in first)
    # a KernelBench problem file with a wrong ModelNew file, appended to the same traces
    r = CliRunner().invoke(app, ["eval", str(files["kb"]), "--solution", str(files["kb_wrong"]),
                                 "--device", "cpu", "--no-timing", "-o", str(files["traces"])],
                           env={"SOLBENCH_CACHE": str(files["cache"])})
    assert r.exit_code == 1, r.output
    assert "INCORRECT_NUMERICAL" in r.stdout and "0/1 workloads PASSED" in r.stdout
    assert f"traces appended to {files['traces']}" in " ".join(r.stdout.split())
    lines2 = files["traces"].read_text().splitlines()
    assert len(lines2) == 3 and lines2[:2] == lines  # appended, earlier lines untouched
    t = Trace.from_json_line(lines2[2])
    assert t.definition == "kb_tanh_mul" and t.solution == "kb_wrong"
    assert t.evaluation.status == Status.INCORRECT_NUMERICAL
    _strict(lines2[2])


def test_eval_workload_selection_and_table(files):
    r = CliRunner().invoke(app, ["eval", str(files["problem"]), "--device", "cpu", "--no-timing",
                                 "--rounds", "5", "--workloads", "b0000000"],
                           env={"SOLBENCH_CACHE": str(files["cache"])})
    assert r.exit_code == 0, r.output
    assert "1/1 workloads PASSED" in r.stdout and "b0000000" in r.stdout


def test_eval_says_when_it_counts_sol_bounds_before_the_first_workload(files):
    """With a SOL hardware, the count (a child process alongside the evaluation: seconds,
    minutes for a reference that loops in Python) is said on stderr before the first workload,
    and how long it took once it is done; the PASSED rows carry the bound (n = 1000 fp32: 3 x
    4 kB moved, at 4.8 TB/s)."""
    r = CliRunner().invoke(app, ["eval", str(files["problem"]), "--device", "cpu", "--hardware", "H200",
                                 "--iters", "3", "--rounds", "2", "--workloads", "b0000000", "--json"],
                           env={"SOLBENCH_CACHE": str(files["cache"])})
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    first = next(i for i, ln in enumerate(lines) if "SOL: counting the bounds of 1 workload(s) for H200" in ln)
    assert any("SOL: bounds ready in" in ln for ln in lines[first + 1:])
    assert all("[1/1]" not in ln for ln in lines[:first + 1])  # said before the workload's line
    (t,) = json.loads(r.stdout)
    assert t["evaluation"]["sol"]["sol_ms"] == pytest.approx(3 * 4000 / 4.8e12 * 1e3)


@pytest.mark.parametrize("args,needle", [
    (["{dir}/nope"], "{dir}/nope: no such problem"),
    (["{dir}/scale_add", "--workloads", "zzz"], "{dir}/scale_add: --workloads: no workload has uuid 'zzz'"),
    (["{dir}/scale_add", "--solution", "{dir}/bad_solution.json"],
     "{dir}/bad_solution.json: spec.languages"),
    (["{dir}/scale_add", "--solution", "{dir}/other_solution.json"],
     "{dir}/other_solution.json: definition: solution is for 'other', not for problem 'scale_add'"),
])
def test_eval_bad_input_one_clean_line_exit_2(files, args, needle):
    d = files["dir"]
    sol = {"name": "s", "definition": "scale_add",
           "spec": {"languages": ["pytorch", "cuda_cpp"], "entry_point": "m.py::run"},
           "sources": [{"path": "m.py", "content": "def run(x, y, alpha, out):\n    pass\n"}]}
    (d / "bad_solution.json").write_text(json.dumps(sol))
    other = dict(sol, definition="other", spec={"languages": ["pytorch"], "entry_point": "m.py::run"})
    (d / "other_solution.json").write_text(json.dumps(other))
    r = CliRunner().invoke(app, ["eval"] + [a.format(dir=d) for a in args] + ["--device", "cpu"])
    assert r.exit_code == 2, r.output
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and needle.format(dir=d) in err[0], err[0]
    assert "Traceback" not in r.output and r.stdout == ""
