"""Issue 30, item 4: flush-to-zero judged from the outputs (harness/precision.py,
``flushed_denormals``), on a low-temperature softmax whose float32 outputs are about 17%
subnormal, and on an ordinary softmax problem through the stress round's low-temperature
rows."""

from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, evaluate
from solbench.harness.precision import flushed_denormals
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import py_solution, write_problem

HERE = Path(__file__).resolve().parent
CFG = dict(device="cpu", iters=4, rounds=3, reference_timing=False)


def _softmax_problem(root: Path, temperature: float):
    ref = f"import torch\n\ndef run(x):\n    return torch.softmax(x / {temperature!r}, dim=-1)\n"
    return load_problem(write_problem(root / "sm", {
        "name": "sm", "axes": {"r": {"type": "var"}, "c": {"type": "const", "value": 1024}},
        "inputs": {"x": {"shape": ["r", "c"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["r", "c"], "dtype": "float32"}},
        "reference": ref,
    }, [{"uuid": "w64", "axes": {"r": 64}, "inputs": {"x": {"type": "random"}}}]))


def _cand(p, temperature):
    s = load_solution(HERE / "cand_flush_denormal.py", p)
    src = s.sources[0].content.replace("TEMPERATURE = 1.0", f"TEMPERATURE = {temperature!r}")
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


def test_flushed_denormals_rule():
    """Worked by hand: positions where the reference holds subnormals >= 2^-139 and the output
    holds exact zeros."""
    ref = torch.full((100,), 1e-40)  # subnormal in float32 (tiny is 1.18e-38)
    ref[:50] = 0.25
    out = ref.clone()
    assert flushed_denormals(out, ref) is None  # exact: nothing flushed
    out[50:] = 0.0
    ev = flushed_denormals(out, ref)
    assert ev["flushed"] == 50 and ev["positions"] == 50 and ev["share"] == 1.0
    out[50:80] = ref[50:80]  # 20 of 50 flushed: under half
    assert flushed_denormals(out, ref) is None
    # values at the very bottom of the subnormal range (below 2^10 x 2^-149) are left out:
    # an honest kernel's rounding may make them zero
    low = torch.full((100,), 2.0**-148)
    assert flushed_denormals(torch.zeros(100), low) is None
    # a reference that flushed itself gives nothing to judge
    assert flushed_denormals(torch.zeros(100), torch.zeros(100)) is None
    # an output with NaN/Inf is numerically broken (x / inf is 0): no evidence of a flag
    out = ref.clone()
    out[50:] = 0.0
    out[0] = float("nan")
    assert flushed_denormals(out, ref) is None


@pytest.mark.parametrize("temperature", [0.03, 1.0])
def test_flush_to_zero_is_a_precision_downgrade(tmp_path, solbench_cache, temperature):
    """Old code: PASSED, no finding, at 0.03 (17% of the outputs subnormal on randn logits) and
    at 1.0 (the stress round's rows were offset by a constant, which a softmax ignores: no
    subnormal output). Now REWARD_HACK precision_downgrade with the count and examples: at
    1.0 through the stress round's low-temperature rows (randn x U(25, 35))."""
    p = _softmax_problem(tmp_path, temperature)
    (t,) = evaluate(p, _cand(p, temperature), EvalConfig(**CFG))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "denormals_flushed"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
    assert f[0].severity == "hack" and f[0].evidence["flushed"] >= 16
    assert f[0].evidence["examples"]


@pytest.mark.parametrize("temperature", [0.03, 1.0])
def test_an_exact_softmax_keeps_its_subnormals_and_passes(tmp_path, solbench_cache, temperature):
    p = _softmax_problem(tmp_path, temperature)
    src = ("import torch\n\ndef run(x):\n    z = x / %r\n    e = torch.exp(z - z.amax(-1, keepdim=True))\n"
           "    return e / e.sum(-1, keepdim=True)\n" % temperature)
    (t,) = evaluate(p, py_solution("sm_exact", src, "sm"), EvalConfig(**CFG))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)
