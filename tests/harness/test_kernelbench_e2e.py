"""KernelBench format end to end: a problem .py (Model, get_inputs, get_init_inputs) and
ModelNew candidates given as .py files; plus the C++ build's cleanup after a timeout."""

import dataclasses

import pytest
import torch

from solbench.harness import EvalConfig
from solbench.harness.evaluator import Evaluator
from solbench.spec import Status, load_problem, load_solution

KB_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x W^T + b)"""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 8
in_features = 32
out_features = 16


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''

KB_GOOD = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same seed -> same parameters

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t()).clamp_min(0.0)
'''

KB_ZEROS = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return torch.zeros(x.shape[0], self.out_features, dtype=x.dtype)
'''


@pytest.fixture(scope="module")
def kb(tmp_path_factory, solbench_cache):
    d = tmp_path_factory.mktemp("kb")
    (d / "linear_relu.py").write_text(KB_PROBLEM)
    (d / "good.py").write_text(KB_GOOD)
    (d / "zeros.py").write_text(KB_ZEROS)
    prob = load_problem(d / "linear_relu.py")
    ev = Evaluator(prob, EvalConfig(device="cpu", rounds=5, iters=3, warmup=1))
    try:
        good = ev.evaluate(load_solution(d / "good.py", prob))
        ev.cfg = dataclasses.replace(ev.cfg, timing=False)
        zeros = ev.evaluate(load_solution(d / "zeros.py", prob))
    finally:
        ev.close()
    return prob, good, zeros


def test_kernelbench_problem_is_adapted(kb):
    prob, _, _ = kb
    assert prob.kind == "kernelbench" and prob.name == "linear_relu" and prob.init_args == (32, 16)
    d = prob.definition
    assert {k: (v.shape, v.dtype) for k, v in d.inputs.items()} == {"arg0": ([8, 32], "float32")}
    assert {k: (v.shape, v.dtype) for k, v in d.outputs.items()} == {"output": ([8, 16], "float32")}
    (w,) = prob.workloads
    assert w.is_custom
    tol = w.tolerance_or_default()
    assert (tol.max_atol, tol.max_rtol, tol.required_matched_ratio) == (1e-2, 1e-2, 1.0)
    # the reference is the Model built with the fixed init seed
    ref = prob.make_reference("cpu")
    torch.manual_seed(prob.init_seed)
    lin = torch.nn.Linear(32, 16)
    assert torch.equal(ref.linear.weight, lin.weight)


def test_kernelbench_model_new_passes(kb):
    _, good, _ = kb
    (t,) = good
    ev = t.evaluation
    assert ev.status == Status.PASSED, ev.log
    assert t.solution == "good" and ev.correctness.extra["rel_l2"] < 1e-6
    assert ev.timing.n_samples == 3 and ev.reference_timing is not None
    # (a resolved reference's time; an unresolved one gives none: measure.cpu_resolution)
    assert ev.performance.reference_latency_ms == (ev.reference_timing.median_ms
                                                   if ev.reference_timing.resolved else None)


def test_kernelbench_zeros_is_incorrect(kb):
    _, _, zeros = kb
    (t,) = zeros
    ev = t.evaluation
    assert ev.status == Status.INCORRECT_NUMERICAL
    # relu(randn-ish) is exactly 0 on about half of the elements; the rest do not match
    assert 0.0 < ev.correctness.extra["matched_ratio"] < 1.0
    assert ev.correctness.extra["rel_l2"] == 1.0 and ev.correctness.extra["failed_check"] == "tolerance"


def test_cpp_build_timeout_removes_stale_lock(tmp_path, monkeypatch):
    from solbench.harness import build
    from solbench.harness.build import BuildError, build_cpp
    from solbench.spec import Solution

    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    sol = Solution.model_validate({
        "name": "c", "definition": "d",
        "spec": {"languages": ["cuda_cpp"], "entry_point": "k.cpp::run"},
        "sources": [{"path": "k.cpp", "content": "int run();\n"}]})
    seen = {}

    def killed_build(cmd, cwd, env, timeout):  # a build killed half-way leaves torch's FileBaton lock
        import json
        job = json.loads(cmd[-1])
        seen["dir"] = job["build_directory"]
        (tmp_path / "cpp" / build.cpp_build_key(sol, "cpu") / "lock").write_text("")
        raise build.BuildTimeout(f"build timed out after {timeout:.0f} s")

    monkeypatch.setattr(build, "run_build", killed_build)
    with pytest.raises(BuildError, match="timed out after 5 s"):
        build_cpp(sol, "cpu", 5)
    from pathlib import Path
    assert Path(seen["dir"]).is_dir() and not (Path(seen["dir"]) / "lock").exists()
