"""Issue 30, item 11: the stress rounds reach every problem whose reference runs an op with
a range hazard (softmax, log_softmax, exp, log, norms, attention), decided from the calls of
the reference (its syntax tree), not from words; and custom workloads of such problems (the
l1 suite's) get them too."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.inputs import differing_profiles
from solbench.inputs.generate import custom_stress_inputs
from solbench.inputs.opclass import called_names
from solbench.spec import Status, load_problem, load_solution
from solbench.spec.definition import Definition
from solbench.inputs import op_classes

ROOT = Path(__file__).resolve().parents[2]
L1 = ROOT / "src" / "solbench" / "suites" / "data" / "l1"
HOSTILE = ROOT / "tests" / "adversarial" / "hostile"


def _defn(ref: str, name: str = "op", **kw) -> Definition:
    return Definition.model_validate({
        "name": name, "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}}, "reference": ref, **kw})


@pytest.mark.parametrize("ref, cls", [
    ("import torch\ndef run(x):\n    e = torch.exp(x - x.max())\n    return e / e.sum()\n", "softmax"),
    ("import torch\ndef run(x):\n    return x - x.exp().sum().log()\n", "softmax"),
    ("import torch.nn as nn\ndef run(x):\n    return nn.Softmax(dim=-1)(x)\n", "softmax"),
    ("import torch\ndef run(x):\n    return x / torch.linalg.vector_norm(x)\n", "norm"),
    ("import torch\ndef run(x):\n    return x / x.norm(p=2)\n", "norm"),
    # a word in a comment or a string, or the problem's name, is not an op
    ("import torch\ndef run(x):\n    # no softmax here, nor layer_norm\n    return x * 2  # 'exp'\n", "generic"),
])
def test_op_class_comes_from_the_references_calls(ref, cls):
    assert op_classes(_defn(ref, name="softmax_like")).name == cls
    assert "softmax" not in (called_names("import torch\n# softmax\nx = 'softmax'\n") or [])


def test_the_custom_entrypoints_ops_are_not_the_op_judged():
    ref = ("import torch\ndef run(x):\n    return x * 2\n"
           "def make(axes, device):\n    return {'x': torch.softmax(torch.randn(axes['n']), -1)}\n")
    assert op_classes(_defn(ref, custom_inputs_entrypoint="make")).name == "generic"


def test_custom_workloads_of_softmax_and_norm_problems_are_stressed():
    """Old code: differing_profiles gave () for every custom workload, so the l1 suite's
    softmax (logits N(0, 3^2) from its entrypoint) never saw a stress round."""
    for name, inputs in (("softmax_fp32", ["x"]), ("log_softmax_fp32", ["x"]), ("layer_norm_fp32", None),
                         ("cross_entropy_fp32", ["logits"])):
        p = load_problem(L1 / name)
        w = p.workloads[0]
        got = custom_stress_inputs(p, w)
        assert got and (inputs is None or got == inputs), (name, got)
        assert differing_profiles(p, w) == ("stress", "stress_sparse"), name
    # a logarithm alone: the KL divergence's inputs are probabilities, a domain of their own
    p = load_problem(L1 / "kl_div_fp32")
    assert custom_stress_inputs(p, p.workloads[0]) == [] and differing_profiles(p, p.workloads[0]) == ()
    p = load_problem(L1 / "relu_fp32")
    assert differing_profiles(p, p.workloads[0]) == ()


def test_softmax_without_max_fails_the_l1_softmax_and_the_reference_passes(tmp_path, solbench_cache):
    """Old code: PASSED (no stress round on the custom workload; the issue saw 2.5x on the
    H100). Now INCORRECT_NUMERICAL from a stress round; the eager reference against itself
    still PASSES there."""
    p = load_problem(L1 / "softmax_fp32")
    cfg = EvalConfig(device="cpu", iters=4, rounds=3, reference_timing=False, workloads=["0"])
    (t,) = evaluate(p, load_solution(HOSTILE / "softmax_no_max.py", p), cfg)
    ev = t.evaluation
    assert ev.status == Status.INCORRECT_NUMERICAL, (ev.status, ev.log[-600:])
    assert "(stress" in ev.log and ev.correctness.extra["upstream_rounds_passed"] is True
    (t,) = evaluate(p, _reference_solution(p), cfg)
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)


def _reference_solution(p):
    from harness_helpers import py_solution

    return py_solution("ref", p.definition.reference, p.definition.name)
