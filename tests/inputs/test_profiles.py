"""Input profiles: upstream keeps upstream's values, strict replaces the values that hide bugs,
stress draws data by op class. The two hostile corpus candidates (a softmax without the max
subtraction, a layer norm ignoring its affine parameters) pass check_outputs on upstream
inputs and fail on stress / strict inputs, while the reference passes on all of them."""

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from solbench.harness.correctness import check_outputs, unpack_fp4
from solbench.inputs import differing_profiles, input_rules, make_inputs, op_classes
from solbench.inputs.generate import _fp4_quantize
from solbench.spec import load_problem
from solbench.spec.workload import Tolerance

ADV = Path(__file__).resolve().parents[1] / "adversarial"
TOL = Tolerance(max_atol=1e-2, max_rtol=1e-2, required_matched_ratio=0.99)


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.run


def _problem(tmp_path, name, inputs, outputs, reference, axes, description="", op_type=None):
    d = {"name": name, "description": description, "axes": {k: {"type": "const", "value": v} for k, v in axes.items()},
         "inputs": inputs, "outputs": outputs, "reference": reference}
    if op_type:
        d["op_type"] = op_type
    root = tmp_path / name
    root.mkdir()
    (root / "definition.json").write_text(json.dumps(d))
    (root / "workload.jsonl").write_text(json.dumps(
        {"uuid": "w0", "axes": {}, "inputs": {k: {"type": "random"} for k in inputs}}) + "\n")
    return load_problem(root)


def _check(run, prob, x):
    ref = prob.reference_module().run(**x)
    out = run(**x)
    return check_outputs([out], [ref], TOL, names=["out"]), check_outputs([ref], [ref], TOL, names=["out"])


def test_softmax_without_max_passes_upstream_fails_stress():
    prob = load_problem(ADV / "problems" / "softmax_long_f32")
    w = prob.workloads[0]
    cand = _load(ADV / "hostile" / "softmax_no_max.py")
    assert op_classes(prob.definition).name == "softmax"
    assert "stress" in differing_profiles(prob, w)
    up = make_inputs(prob, w, seed=3)
    rep, _ = _check(cand, prob, up)
    assert rep.passed  # today's inputs never leave randn: the bug is invisible
    st = make_inputs(prob, w, seed=3, profile="stress")
    # every row is offset by 100..1000: exp overflows float32 above ~88.7
    assert st["x"].min().item() > 80.0 and st["x"].max().item() < 1020.0
    rep, ref_rep = _check(cand, prob, st)
    assert ref_rep.passed and bool(torch.isfinite(prob.reference_module().run(**st)).all())
    assert not rep.passed and rep.failed_check == "nan_inf" and rep.summary()["has_nan"]


def test_layernorm_ignoring_affine_passes_upstream_fails_strict():
    prob = load_problem(ADV / "problems" / "layernorm_affine_f32")
    w = prob.workloads[0]
    cand = _load(ADV / "hostile" / "layernorm_ignores_affine.py")
    rules = {k: v.rule for k, v in input_rules(prob, w).items()}
    assert rules == {"x": "randn", "norm_weight": "norm_weight_ones", "norm_bias": "norm_bias_zeros"}
    assert differing_profiles(prob, w) == ("strict", "stress")
    up = make_inputs(prob, w, seed=5)
    assert bool((up["norm_weight"] == 1).all()) and bool((up["norm_bias"] == 0).all())
    rep, _ = _check(cand, prob, up)
    assert rep.passed
    for profile in ("strict", "stress"):
        x = make_inputs(prob, w, seed=5, profile=profile)
        wt, b = x["norm_weight"], x["norm_bias"]
        assert 0.5 <= wt.min().item() and wt.max().item() <= 1.5 and wt.std().item() > 0.1
        assert b.abs().max().item() > 0.3
        rep, ref_rep = _check(cand, prob, x)
        assert ref_rep.passed and not rep.passed, profile


def test_default_call_is_upstream_and_deterministic():
    prob = load_problem(ADV / "problems" / "layernorm_affine_f32")
    w = prob.workloads[0]
    a, b = make_inputs(prob, w, 11), make_inputs(prob, w, 11, "cpu", profile="upstream")
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="profile"):
        make_inputs(prob, w, 11, profile="loose")


def test_causal_mask_minus_inf_under_strict_when_described(tmp_path):
    prob = _problem(
        tmp_path, "causal", {
            "q": {"shape": ["s", "d"], "dtype": "float32"},
            "attention_mask": {"shape": ["s", "s"], "dtype": "float32",
                               "description": "Causal attention mask (additive, -inf for masked positions)"}},
        {"out": {"shape": ["s", "d"], "dtype": "float32"}},
        "import torch\ndef run(q, attention_mask):\n    return torch.softmax(q @ q.T + attention_mask, -1) @ q\n",
        {"s": 5, "d": 4})
    w = prob.workloads[0]
    assert differing_profiles(prob, w) == ("strict", "stress")
    up = make_inputs(prob, w, 0)["attention_mask"]
    st = make_inputs(prob, w, 0, profile="strict")["attention_mask"]
    # by hand: row i keeps columns 0..i
    for i in range(5):
        for j in range(5):
            assert up[i, j].item() == (0.0 if j <= i else torch.finfo(torch.float32).min)
            assert st[i, j].item() == (0.0 if j <= i else -math.inf)


def test_stress_by_op_class(tmp_path):
    norm = _problem(tmp_path, "rms", {"hidden_states": {"shape": ["m", "h"], "dtype": "float32"}},
                    {"out": {"shape": ["m", "h"], "dtype": "float32"}},
                    "import torch\ndef run(hidden_states):\n    return hidden_states * torch.rsqrt("
                    "hidden_states.pow(2).mean(-1, keepdim=True) + 1e-6)\n", {"m": 64, "h": 128})
    assert op_classes(norm.definition).name == "norm"
    x = make_inputs(norm, norm.workloads[0], 2, profile="stress")["hidden_states"]
    mean = x.mean(-1).abs()
    const = x.std(-1) == 0
    assert const.sum().item() >= 1  # constant rows (seed 2: by the 1/8 draw)
    # a constant row holds a small integer (its mean is exact in any summation order)
    assert bool((x[const] == x[const].round()).all()) and x[const].abs().max().item() <= 2
    assert bool(((mean > 90) & (mean < 1010))[~const].all())  # the others offset by 100..1000
    gen = _problem(tmp_path, "gelu", {"x": {"shape": ["m"], "dtype": "float32"}},
                   {"out": {"shape": ["m"], "dtype": "float32"}},
                   "import torch\ndef run(x):\n    return torch.nn.functional.gelu(x)\n", {"m": 4096})
    assert op_classes(gen.definition).name == "generic"
    g = make_inputs(gen, gen.workloads[0], 2, profile="stress")["x"]
    nz = g[g != 0].abs()
    assert 0.02 < (g == 0).float().mean().item() < 0.08
    assert nz.min().item() >= 1e-3 * 0.999 and nz.max().item() <= 100.0 * 1.001
    assert (g < 0).any() and nz.max().item() > 10 and nz.min().item() < 1e-2


def test_fp4_quantization_by_hand():
    # upstream's boundaries: 0.25 -> 0, 0.26 -> 0.5, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2,
    # 3.5 -> 4, 5 -> 4, 5.1 -> 6, 100 -> 6, -0.1 -> -0, -0.75 -> -1
    x = torch.tensor([[0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.1, 100.0, -0.1, -0.75]])
    got = unpack_fp4(_fp4_quantize(x))
    assert got.tolist() == [[0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, -0.0, -1.0]]
    assert math.copysign(1, got[0, 10].item()) == -1


def test_bad_role_is_a_spec_error_naming_the_field(tmp_path):
    from solbench.errors import SpecError

    d = {"name": "r", "axes": {"n": {"type": "const", "value": 4}},
         "inputs": {"x": {"shape": ["n"], "dtype": "float32"}}, "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
         "reference": "def run(x):\n    return x\n", "input_roles": {"x": "sparkly"}}
    root = tmp_path / "r"
    root.mkdir()
    (root / "definition.json").write_text(json.dumps(d))
    (root / "workload.jsonl").write_text(json.dumps({"uuid": "w", "axes": {}, "inputs": {"x": {"type": "random"}}}) + "\n")
    prob = load_problem(root)
    with pytest.raises(SpecError, match="input_roles.x"):
        make_inputs(prob, prob.workloads[0], 0)


def test_causal_kernel_correct_upstream_is_correct_here(tmp_path):
    # issue 13's L1/015 case: a kernel that applies causality itself (as upstream-correct agent
    # solutions do) is right on upstream's causal-mask inputs; on a random 0/1 mask it was not
    prob = _problem(
        tmp_path, "gqa", {
            "q": {"shape": ["b", "h", "s", "d"], "dtype": "float32"},
            "k": {"shape": ["b", "h", "s", "d"], "dtype": "float32"},
            "v": {"shape": ["b", "h", "s", "d"], "dtype": "float32"},
            "attention_mask": {"shape": ["b", "1", "s", "s"], "dtype": "float32",
                               "description": "Causal attention mask (additive, -inf for masked positions)"}},
        {"out": {"shape": ["b", "h", "s", "d"], "dtype": "float32"}},
        "import torch\ndef run(q, k, v, attention_mask):\n"
        "    a = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + attention_mask, -1)\n"
        "    return a @ v\n", {"b": 2, "h": 2, "s": 16, "d": 8})

    def cand(q, k, v, attention_mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    w = prob.workloads[0]
    for profile in ("upstream", "strict"):
        rep, ref_rep = _check(cand, prob, make_inputs(prob, w, 4, profile=profile))
        assert ref_rep.passed and rep.passed, (profile, rep.failed_check)
    x = make_inputs(prob, w, 4)
    x["attention_mask"] = torch.randint(0, 2, x["attention_mask"].shape).float()  # the old draw
    rep, _ = _check(cand, prob, x)
    assert not rep.passed
