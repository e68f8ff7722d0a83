"""Axis expressions (safe, hand-evaluated), tolerance aliases, and input generation: fp8 and
packed fp4 dtypes/shapes, scalars, safetensors blobs, custom entry points, determinism."""

import json
from pathlib import Path

import pytest
import torch

from solbench.errors import SpecError
from solbench.harness.correctness import unpack_fp4
from solbench.inputs import make_inputs
from solbench.spec import Tolerance, Workload, load_problem
from solbench.spec import axes as axes_expr
from solbench.spec.definition import Definition


def write_problem(root: Path, definition: dict, workloads: list[dict]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "definition.json").write_text(json.dumps(definition))
    (root / "workload.jsonl").write_text("\n".join(json.dumps(w) for w in workloads) + "\n")
    return root


# ---------------------------------------------------------------- axes
@pytest.mark.parametrize("expr,env,want", [
    ("a * b + c // 2", {"a": 3, "b": 5, "c": 9}, 19),
    ("(a + b) % 4", {"a": 7, "b": 6}, 1),
    ("2 ** a - 1", {"a": 10}, 1023),
    ("-a + +b", {"a": 3, "b": 5}, 2),
    ("a / 4", {"a": 10}, 2.5),
    ("a % 8 == 0 and b >= a", {"a": 16, "b": 16}, True),
    ("not (a < b < 3)", {"a": 1, "b": 2}, False),
    ("a > 1 or b > 1", {"a": 0, "b": 1}, False),
])
def test_axis_expression_values(expr, env, want):
    assert axes_expr.evaluate(expr, env) == want


@pytest.mark.parametrize("expr,msg", [
    ("__import__('os').getpid()", "Call is not allowed"),
    ("a.__class__", "Attribute is not allowed"),
    ("[a for a in b]", "is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("a[0]", "Subscript is not allowed"),
    ("'x' * 3", "is not a number"),
    ("True + 1", "is not a number"),
    ("a +", "not a valid expression"),
])
def test_axis_expression_rejects_unsafe(expr, msg):
    with pytest.raises(axes_expr.ExpressionError, match=msg.replace("(", r"\(")):
        axes_expr.evaluate(expr, {"a": 1, "b": [1]})


@pytest.mark.parametrize("expr,msg", [("a // 0", "division by zero"), ("2 ** 65", "too large"),
                                      ("q + 1", "unknown axis 'q'")])
def test_axis_expression_runtime_errors(expr, msg):
    with pytest.raises(axes_expr.ExpressionError, match=msg):
        axes_expr.evaluate(expr, {"a": 3})


def _expr_def(**over):
    d = {
        "name": "e",
        "axes": {"batch": {"type": "var"}, "heads": {"type": "const", "value": 8},
                 "hd": {"type": "const", "value": 64},
                 "hidden": {"type": "expr", "expression": "heads * hd"},
                 "tokens": {"type": "expr", "expression": "batch * (seq + 1)"},
                 "seq": {"type": "var"}},
        "inputs": {"x": {"shape": ["tokens", "hidden"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["tokens", "1"], "dtype": "float32"}},
        "reference": "def run(x):\n    return x.sum(-1, keepdim=True)\n",
        "constraints": ["hidden % 128 == 0", "seq <= 4096"],
    }
    d.update(over)
    return Definition.model_validate(d)


def test_resolve_axes_hand_values():
    d = _expr_def()
    env = d.resolve_axes({"batch": 3, "seq": 7})
    # const and var as given; hidden = 8*64; tokens = 3*(7+1); definition order kept
    assert env == {"batch": 3, "heads": 8, "hd": 64, "hidden": 512, "tokens": 24, "seq": 7}
    assert list(env) == ["batch", "heads", "hd", "hidden", "tokens", "seq"]
    assert d.shape_of(d.inputs["x"], env) == (24, 512)
    assert d.shape_of(d.outputs["y"], env) == (24, 1)  # digit-string literal dims


def test_resolve_axes_errors():
    d = _expr_def()
    with pytest.raises(ValueError, match="axes.seq: var axis has no value"):
        d.resolve_axes({"batch": 1})
    with pytest.raises(ValueError, match=r"constraints: 'seq <= 4096' is false"):
        d.resolve_axes({"batch": 1, "seq": 5000})
    with pytest.raises(ValueError, match="contradicts the definition"):
        d.resolve_axes({"batch": 1, "seq": 2, "heads": 4})
    with pytest.raises(ValueError, match=r"unknown axes \['zz'\]"):
        d.resolve_axes({"batch": 1, "seq": 2, "zz": 4})
    with pytest.raises(ValueError, match="is not an integer"):
        d.resolve_axes({"batch": 1.5, "seq": 2})
    half = _expr_def(axes={"n": {"type": "var"}, "h": {"type": "expr", "expression": "n / 2"}},
                     inputs={"x": {"shape": ["n"], "dtype": "float32"}},
                     outputs={"y": {"shape": ["h"], "dtype": "float32"}}, constraints=None)
    assert half.resolve_axes({"n": 6})["h"] == 3
    with pytest.raises(ValueError, match=r"axes.h: 'n / 2' = 2.5 is not an integer"):
        half.resolve_axes({"n": 5})
    with pytest.raises(ValueError, match="circular"):
        _expr_def(axes={"a": {"type": "expr", "expression": "b + 1"},
                        "b": {"type": "expr", "expression": "a + 1"}},
                  inputs={"x": {"shape": ["a"], "dtype": "float32"}},
                  outputs={"y": {"shape": ["b"], "dtype": "float32"}}, constraints=None).resolve_axes({})


# ---------------------------------------------------------------- tolerance
def test_tolerance_alias_and_defaults():
    t = Tolerance.model_validate({"max_atol": 1e-3, "required_match_ratio": 0.95})
    assert t.required_matched_ratio == 0.95 and t.max_atol == 1e-3 and t.max_rtol == 1e-2
    assert Tolerance.model_validate({"required_matched_ratio": 0.5}).required_matched_ratio == 0.5
    w = Workload.model_validate({"uuid": "u", "axes": {}, "inputs": {}})
    d = w.tolerance_or_default()
    assert (d.max_atol, d.max_rtol, d.required_matched_ratio, d.max_error_cap, d.allow_negative_inf) == \
        (1e-2, 1e-2, 0.99, None, False)
    with pytest.raises(ValueError, match="max_atol and max_rtol must be >= 0"):
        Tolerance(max_atol=-1)


# ---------------------------------------------------------------- input generation
LOWP_DEF = {
    "name": "lowp",
    "axes": {"m": {"type": "var"}, "k": {"type": "const", "value": 16},
             "k_packed": {"type": "expr", "expression": "k // 2"}},
    "inputs": {
        "a8": {"shape": ["m", "k"], "dtype": "float8_e4m3fn"},
        "b8": {"shape": ["m", "k"], "dtype": "float8_e5m2"},
        "a4": {"shape": ["m", "k_packed"], "dtype": "float4_e2m1fn_x2"},
        "alias4": {"shape": ["m", "k_packed"], "dtype": "float4_e2m1"},
        "idx": {"shape": ["m"], "dtype": "int64"},
        "flag": {"shape": ["m"], "dtype": "bool"},
        "h": {"shape": ["m", "k"], "dtype": "bfloat16"},
        "alpha": {"shape": None, "dtype": "float32"},
        "beta": {"shape": None, "dtype": "float32"},
        "scale0d": {"shape": [], "dtype": "float32"},
    },
    "outputs": {"y": {"shape": ["m", "k"], "dtype": "bfloat16"}},
    "reference": "def run(a8, b8, a4, alias4, idx, flag, h, alpha, beta, scale0d):\n    return h\n",
    "input_roles": {"idx": "index:k"},
}


@pytest.fixture
def lowp(tmp_path):
    srcs = {k: {"type": "random"} for k in LOWP_DEF["inputs"]}
    srcs["beta"] = {"type": "scalar", "value": 0.25}
    return load_problem(write_problem(tmp_path / "lowp", LOWP_DEF, [{"uuid": "w", "axes": {"m": 6}, "inputs": srcs}]))


def test_low_precision_inputs_dtypes_shapes_ranges(lowp):
    x = make_inputs(lowp, lowp.workloads[0], seed=3)
    assert list(x) == list(LOWP_DEF["inputs"])  # definition order
    assert x["a8"].dtype == torch.float8_e4m3fn and x["a8"].shape == (6, 16)
    assert x["b8"].dtype == torch.float8_e5m2 and x["b8"].shape == (6, 16)
    for k in ("a8", "b8"):  # randn clamped to +-2 then cast
        v = x[k].float()
        assert v.abs().max().item() <= 2.0 and v.std().item() > 0.3
    for k in ("a4", "alias4"):  # packed: the declared last dim already counts bytes
        assert x[k].dtype == torch.float4_e2m1fn_x2 and x[k].shape == (6, 8)
        vals = unpack_fp4(x[k])
        assert vals.shape == (6, 16)
        assert set(vals.unique().tolist()) <= {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                               -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0}
    assert x["idx"].dtype == torch.int64 and 0 <= x["idx"].min() and x["idx"].max() < 16
    assert x["flag"].dtype == torch.bool
    assert x["h"].dtype == torch.bfloat16
    assert isinstance(x["alpha"], float) and x["beta"] == 0.25
    assert isinstance(x["scale0d"], torch.Tensor) and x["scale0d"].shape == ()
    assert lowp.workload_bytes(lowp.workloads[0]) == (6 * 16 * 1 * 2 + 6 * 8 * 2 + 6 * 8 + 6 + 6 * 16 * 2
                                                      + 8 + 8 + 4 + 6 * 16 * 2)


def test_make_inputs_deterministic_for_a_seed(lowp):
    w = lowp.workloads[0]
    a, b, c = (make_inputs(lowp, w, seed=s) for s in (11, 11, 12))

    def same(u, v):
        if isinstance(u, torch.Tensor):
            return u.dtype == v.dtype and torch.equal(u.reshape(-1).view(torch.uint8), v.reshape(-1).view(torch.uint8))
        return u == v

    assert all(same(a[k], b[k]) for k in a)
    assert not same(a["h"], c["h"]) and not same(a["a4"], c["a4"])
    assert same(a["beta"], c["beta"])  # a scalar source is a constant


def test_safetensors_blob_found_in_problem_dir_and_trace_dir(tmp_path, monkeypatch):
    from safetensors.torch import save_file

    d = {"name": "st", "axes": {"n": {"type": "var"}},
         "inputs": {"ids": {"shape": ["n"], "dtype": "int32"}, "x": {"shape": ["n"], "dtype": "float32"}},
         "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
         "reference": "def run(ids, x):\n    return x\n"}
    w = {"uuid": "w", "axes": {"n": 4}, "inputs": {
        "ids": {"type": "safetensors", "path": "blobs/a.safetensors", "tensor_key": "ids"},
        "x": {"type": "random"}}}
    prob = load_problem(write_problem(tmp_path / "p", d, [w]))
    ids = torch.tensor([3, 1, 4, 1], dtype=torch.int32)
    # in $FLASHINFER_TRACE_DIR
    (tmp_path / "trace" / "blobs").mkdir(parents=True)
    save_file({"ids": ids}, str(tmp_path / "trace" / "blobs" / "a.safetensors"))
    monkeypatch.setenv("FLASHINFER_TRACE_DIR", str(tmp_path / "trace"))
    assert torch.equal(make_inputs(prob, prob.workloads[0], 0)["ids"], ids)
    assert prob.missing_blobs() == []
    # the problem dir comes first
    (tmp_path / "p" / "blobs").mkdir()
    save_file({"ids": ids * 2}, str(tmp_path / "p" / "blobs" / "a.safetensors"))
    assert make_inputs(prob, prob.workloads[0], 0)["ids"].tolist() == [6, 2, 8, 2]
    # a wrong key names the key
    save_file({"other": ids}, str(tmp_path / "p" / "blobs" / "a.safetensors"))
    with pytest.raises(SpecError, match="tensor_key 'ids'"):
        make_inputs(prob, prob.workloads[0], 0)


CUSTOM_DEF = {
    "name": "cust", "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "k": {"shape": None, "dtype": "int64"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": ("import torch\n\ndef run(x, k):\n    return x * k\n\n"
                  "def make(axes, device):\n    n = axes['n']\n"
                  "    return {'x': torch.arange(n, dtype=torch.float32, device=device) + torch.rand(n, device=device),"
                  " 'k': n + 1}\n\n"
                  "def wrong(axes, device):\n    return {'x': torch.zeros(axes['n'] + 1), 'k': 1}\n"),
    "custom_inputs_entrypoint": "make",
}


def test_custom_inputs_entrypoint(tmp_path):
    w = {"uuid": "w", "axes": {"n": 5}, "inputs": {"x": {"type": "custom"}, "k": {"type": "custom"}}}
    prob = load_problem(write_problem(tmp_path / "c", CUSTOM_DEF, [w]))
    a = make_inputs(prob, prob.workloads[0], seed=1)
    b = make_inputs(prob, prob.workloads[0], seed=1)
    c = make_inputs(prob, prob.workloads[0], seed=2)
    assert a["k"] == 6 and a["x"].shape == (5,)
    assert (a["x"] - torch.arange(5.0)).min() >= 0 and (a["x"] - torch.arange(5.0)).max() < 1
    assert torch.equal(a["x"], b["x"]) and not torch.equal(a["x"], c["x"])  # seeded
    bad = dict(CUSTOM_DEF, custom_inputs_entrypoint="wrong")
    prob2 = load_problem(write_problem(tmp_path / "d", bad, [w]))
    with pytest.raises(SpecError, match=r"inputs.x.shape: entrypoint made shape \(6,\), declared \(5,\)"):
        make_inputs(prob2, prob2.workloads[0], seed=1)
    # custom inputs without an entry point are rejected when loading
    nocust = dict(CUSTOM_DEF, custom_inputs_entrypoint=None)
    with pytest.raises(SpecError, match="custom_inputs_entrypoint"):
        load_problem(write_problem(tmp_path / "e", nocust, [w]))
