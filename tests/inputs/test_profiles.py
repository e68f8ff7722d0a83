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
    assert differing_profiles(prob, w) == ("stress", "stress_sparse")
    up = make_inputs(prob, w, seed=3)
    rep, _ = _check(cand, prob, up)
    assert rep.passed  # upstream's inputs never leave randn: the bug is invisible
    for profile in ("stress", "stress_sparse"):
        st = make_inputs(prob, w, seed=3, profile=profile)
        # some logit is above ~88.7 (exp overflows float32) or a whole row below -103
        assert st["x"].max().item() > 90.0 and st["x"].abs().max().item() < 1020.0
        rep, ref_rep = _check(cand, prob, st)
        assert ref_rep.passed and bool(torch.isfinite(prob.reference_module().run(**st)).all())
        assert not rep.passed and rep.failed_check == "nan_inf" and rep.summary()["has_nan"], profile


def test_layernorm_ignoring_affine_passes_upstream_fails_strict():
    prob = load_problem(ADV / "problems" / "layernorm_affine_f32")
    w = prob.workloads[0]
    cand = _load(ADV / "hostile" / "layernorm_ignores_affine.py")
    rules = {k: v.rule for k, v in input_rules(prob, w).items()}
    assert rules == {"x": "randn", "norm_weight": "norm_weight_ones", "norm_bias": "norm_bias_zeros"}
    assert differing_profiles(prob, w) == ("strict", "stress", "stress_sparse")
    up = make_inputs(prob, w, seed=5)
    assert bool((up["norm_weight"] == 1).all()) and bool((up["norm_bias"] == 0).all())
    rep, _ = _check(cand, prob, up)
    assert rep.passed
    for profile in ("strict", "stress", "stress_sparse"):
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
    assert differing_profiles(prob, w) == ("strict", "stress", "stress_sparse")
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
    assert const.sum().item() >= 1  # constant rows (at least one, by construction)
    # a constant row holds a small integer (its mean is exact in any summation order)
    assert bool((x[const] == x[const].round()).all()) and x[const].abs().max().item() <= 2
    m = x.mean(-1)
    # a random subset of rows offset by 100..1000, at least one of each sign; the rest randn
    # rows (|mean| of 128 randn plus at most a few spikes of <= 1000: below 25)
    assert ((m > 90) & (m < 1010)).any() and ((m < -90) & (m > -1010)).any()
    offset = (mean > 90) & (mean < 1010)
    plain = ~offset & ~const
    assert plain.any() and bool((mean[plain] < 25).all())
    assert int(offset.sum()) + int(const.sum()) + int(plain.sum()) == 64
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


def _softmax_problem(tmp_path, rows, cols):
    return _problem(tmp_path, f"sm{rows}", {"x": {"shape": ["m", "n"], "dtype": "float32"}},
                    {"out": {"shape": ["m", "n"], "dtype": "float32"}},
                    "import torch\ndef run(x):\n    return torch.softmax(x, -1)\n", {"m": rows, "n": cols})


def test_stress_sets_are_deterministic_under_their_seed(tmp_path):
    prob = _softmax_problem(tmp_path, 16, 256)
    w = prob.workloads[0]
    for profile in ("stress", "stress_sparse"):
        a, b = make_inputs(prob, w, 41, profile=profile)["x"], make_inputs(prob, w, 41, profile=profile)["x"]
        c = make_inputs(prob, w, 42, profile=profile)["x"]
        assert torch.equal(a, b) and not torch.equal(a, c)


def test_stress_rows_and_spikes_are_placed_at_random(tmp_path):
    """Issue 13: every row of the first stress distribution was offset upwards, so "column 0's
    minimum is above 50" told a stress set from an upstream one. Now, over 100 seeds of a
    64 x 256 softmax input: every set has rows offset up, rows offset down, low-temperature
    rows (issue 30: randn x U(25, 35), subnormal softmax outputs) and ordinary rows
    (|row median| < 1) of which some carry a spike above 100; which rows are
    which changes with the seed (no row is offset in every set), and column 0's minimum is
    below 50 in every set."""
    prob = _softmax_problem(tmp_path, 64, 256)
    w = prob.workloads[0]
    up_rows, down_rows = torch.zeros(64), torch.zeros(64)
    for seed in range(100):
        x = make_inputs(prob, w, seed, profile="stress")["x"]
        med = x.median(-1).values  # a spike does not move a row's median, nor its quartiles
        iqr = x.quantile(0.75, -1) - x.quantile(0.25, -1)
        up, down = med > 90, med < -90
        cold = (iqr > 10) & ~up & ~down  # low temperature: randn x U(25, 35), IQR about 40
        plain = (med.abs() < 1) & (iqr < 10)
        assert up.any() and down.any() and plain.any() and cold.any(), seed
        assert int(up.sum() + down.sum() + plain.sum() + cold.sum()) == 64
        assert (x[plain].max(-1).values > 100).any(), seed  # spikes in ordinary rows
        assert x[:, 0].min().item() < 50
        up_rows += up.float()
        down_rows += down.float()
    assert up_rows.max() < 60 and down_rows.max() < 60  # each row offset in ~25 of 100 sets
    assert (up_rows > 0).all() and (down_rows > 0).all()


def test_sparse_stress_set_looks_upstream_to_a_sample(tmp_path):
    """The sparse set is upstream's randn but for 1 to 4 spikes: a strided sample of one element
    in 61 sees no value above 30 on most sets (by hand: the chance to hit one of k spikes is
    about k / 61 <= 6.6%; over 200 seeds at most 10% allowed), yet every set holds a spike
    above 100 and its row's softmax without the max subtraction is NaN."""
    prob = _softmax_problem(tmp_path, 64, 256)
    w = prob.workloads[0]
    seen = 0
    for seed in range(200):
        x = make_inputs(prob, w, seed, profile="stress_sparse")["x"]
        big = x.abs() > 30
        assert 1 <= int(big.sum()) <= 4 and x.max().item() > 100
        assert ((x.abs() < 6) | big).all()  # the rest is randn
        seen += bool(x.reshape(-1)[::61].abs().max() > 30)
    assert seen <= 20


@pytest.mark.parametrize("hostile", ["softmax_sniff_col0", "softmax_sniff_sample"])
def test_stress_sniffers_pass_upstream_and_fail_a_stress_set(hostile):
    """Two candidates that try to tell a stress set from an upstream one by a statistic of a
    few elements (column 0's minimum; a strided sample) and skip the max subtraction
    otherwise: exact on upstream's inputs, and NaN on a stress set of the same seed, over
    20 seeds each (a sample can hit a sparse spike: about 1 seed in 15, so the dense and the
    sparse set together are what must catch it)."""
    prob = load_problem(ADV / "problems" / "softmax_long_f32")
    w = prob.workloads[0]
    cand = _load(ADV / "hostile" / f"{hostile}.py")
    n_caught = 0
    for seed in range(20):
        rep, _ = _check(cand, prob, make_inputs(prob, w, seed))
        assert rep.passed
        caught = []
        for profile in ("stress", "stress_sparse"):
            rep, ref_rep = _check(cand, prob, make_inputs(prob, w, seed, profile=profile))
            assert ref_rep.passed
            caught.append(not rep.passed)
        if hostile == "softmax_sniff_col0":
            assert all(caught), seed
        else:
            assert not caught[0]  # the sample sees the offset rows and takes the safe path
        n_caught += caught[1]
    assert n_caught >= 17
