"""The inputs layer's plan (source, shape, dtype, rule of every input), absent blobs drawn for
consumers that need no trace values (the SOL counter), substitutes, and the valid integer
values of :mod:`solbench.inputs.structure`. Expected values are worked out by hand or drawn
with an independently seeded generator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from solbench.errors import MissingBlobError, SpecError
from solbench.inputs import (InputRule, input_rules, load_blob, make_inputs, plan_inputs,
                             synthesize_indices)
from solbench.spec import load_problem

REF = "import torch\ndef run(logits, bias, x, norm_weight, idx, n, s, cnt):\n    return x\n"


def _problem(tmp_path: Path, blob: dict | None = None):
    """logits [4, 8] f32 and bias [8] bf16 from a safetensors blob (written when ``blob`` is
    given), x [4, 16] f32 random, norm_weight [16] random, idx [6] int64 with role index:n,
    n [3] int32 random, s a scalar 0.5, cnt a random int scalar."""
    d = tmp_path / "p"
    d.mkdir()
    defn = {"name": "p", "axes": {"t": {"type": "var"}, "e": {"type": "const", "value": 8},
                                   "h": {"type": "const", "value": 16}},
            "inputs": {"logits": {"shape": ["t", "e"], "dtype": "float32"},
                       "bias": {"shape": ["e"], "dtype": "bfloat16"},
                       "x": {"shape": ["t", "h"], "dtype": "float32"},
                       "norm_weight": {"shape": ["h"], "dtype": "float32"},
                       "idx": {"shape": [6], "dtype": "int64"},
                       "n": {"shape": [3], "dtype": "int32"},
                       "s": {"shape": None, "dtype": "float32"},
                       "cnt": {"shape": None, "dtype": "int64"}},
            "input_roles": {"idx": "index:t"},
            "outputs": {"y": {"shape": ["t", "h"], "dtype": "float32"}}, "reference": REF}
    (d / "definition.json").write_text(json.dumps(defn))
    src = {"type": "safetensors", "path": "blobs/w0.safetensors"}
    inputs = {"logits": dict(src, tensor_key="logits"), "bias": dict(src, tensor_key="bias"),
              "x": {"type": "random"}, "norm_weight": {"type": "random"}, "idx": {"type": "random"},
              "n": {"type": "random"}, "s": {"type": "scalar", "value": 0.5}, "cnt": {"type": "random"}}
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {"t": 4}, "inputs": inputs}) + "\n")
    if blob is not None:
        from safetensors.torch import save_file

        (d / "blobs").mkdir()
        save_file(blob, str(d / "blobs" / "w0.safetensors"))
    p = load_problem(d)
    return p, p.workloads[0]


def test_plan_gives_sources_shapes_dtypes_and_rules(tmp_path):
    p, w = _problem(tmp_path)
    plan = plan_inputs(p, w)
    assert list(plan) == ["logits", "bias", "x", "norm_weight", "idx", "n", "s", "cnt"]
    assert [plan[k].source for k in plan] == ["safetensors", "safetensors", "random", "random", "random",
                                              "random", "scalar", "random_scalar"]
    assert plan["logits"].shape == (4, 8) and plan["logits"].dtype == torch.float32
    assert plan["bias"].shape == (8,) and plan["bias"].dtype == torch.bfloat16
    assert plan["logits"].missing_blob and plan["logits"].blob is None and plan["logits"].rule is None
    assert plan["x"].rule == InputRule("randn")
    assert plan["norm_weight"].rule == InputRule("norm_weight_ones")
    assert plan["idx"].rule == InputRule("role_index", "t")
    assert plan["n"].rule == InputRule("int_uniform")
    assert plan["s"].value == 0.5 and plan["s"].shape is None
    # input_rules is the plan's view
    assert input_rules(p, w) == {"logits": "safetensors", "bias": "safetensors", "x": InputRule("randn"),
                                 "norm_weight": InputRule("norm_weight_ones"),
                                 "idx": InputRule("role_index", "t"), "n": InputRule("int_uniform"),
                                 "s": "scalar", "cnt": "random_scalar"}


def test_absent_blob_raises_unless_drawn(tmp_path):
    p, w = _problem(tmp_path)
    with pytest.raises(MissingBlobError, match="logits"):
        make_inputs(p, w, 0)
    with pytest.raises(MissingBlobError):
        load_blob(p, w, "bias")
    with pytest.raises(ValueError, match="missing_blobs"):
        make_inputs(p, w, 0, missing_blobs="guess")
    v = make_inputs(p, w, 0, missing_blobs="draw")
    # drawn in definition order, one serial pass each, from a generator of their own seeded 0
    g = torch.Generator().manual_seed(0)
    assert torch.equal(v["logits"], torch.randn((4, 8), generator=g))
    assert torch.equal(v["bias"], torch.randn((8,), generator=g).to(torch.bfloat16))
    # the random inputs keep the values a draw without absent blobs gives them: their own
    # generator, seeded 0, in definition order (x first)
    g = torch.Generator().manual_seed(0)
    assert torch.equal(v["x"], torch.randn((4, 16), generator=g))
    assert torch.equal(v["norm_weight"], torch.ones(16))
    assert v["idx"].dtype == torch.int64 and 0 <= int(v["idx"].min()) and int(v["idx"].max()) < 4
    assert v["s"] == 0.5 and isinstance(v["cnt"], int)


def test_present_blob_is_loaded_in_every_mode(tmp_path):
    logits = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    bias = torch.full((8,), 0.25, dtype=torch.bfloat16)
    p, w = _problem(tmp_path, {"logits": logits, "bias": bias})
    assert not plan_inputs(p, w)["logits"].missing_blob
    for mode in ("error", "draw"):
        v = make_inputs(p, w, 3, missing_blobs=mode, substitute=lambda q: torch.zeros(q.shape, dtype=q.dtype))
        assert torch.equal(v["logits"], logits) and torch.equal(v["bias"], bias)
    assert torch.equal(load_blob(p, w, "logits"), logits)


def test_blob_without_its_key_is_a_spec_error(tmp_path):
    p, w = _problem(tmp_path, {"logits": torch.zeros(4, 8)})
    with pytest.raises(SpecError, match="bias"):
        make_inputs(p, w, 0)


def test_substitute_replaces_draws_and_leaves_absent_blob_values_alone(tmp_path):
    p, w = _problem(tmp_path)
    seen = []

    def sub(q):
        seen.append(q.name)
        return torch.full(q.shape, 7, dtype=q.dtype) if q.name in ("x", "logits") else None

    v = make_inputs(p, w, 0, substitute=sub, missing_blobs="draw")
    # consulted for each tensor the call would draw (absent blobs included), never scalars
    assert seen == ["logits", "bias", "x", "norm_weight", "idx", "n"]
    assert torch.equal(v["x"], torch.full((4, 16), 7.0)) and torch.equal(v["logits"], torch.full((4, 8), 7.0))
    # the absent blobs' generator was not advanced for the substituted logits: bias is its
    # first draw
    assert torch.equal(v["bias"], torch.randn((8,), generator=torch.Generator().manual_seed(0)).to(torch.bfloat16))
    # a substitute of a random input leaves the absent blobs' values as they are without it
    only_x = make_inputs(p, w, 0, missing_blobs="draw",
                         substitute=lambda q: torch.zeros(q.shape) if q.name == "x" else None)
    ref = make_inputs(p, w, 0, missing_blobs="draw")
    assert torch.equal(only_x["logits"], ref["logits"]) and torch.equal(only_x["bias"], ref["bias"])
    # the harness's call (no substitute) draws the same values as before the plan existed
    assert torch.equal(make_inputs(p, w, 5, missing_blobs="draw")["x"],
                       torch.randn((4, 16), generator=torch.Generator().manual_seed(5)))


def test_synthesize_indices_by_hand():
    vals = {"q": torch.empty(3, 4), "k_cache": torch.empty(8, 2), "kv_indptr": torch.full((3,), -5, dtype=torch.int32),
            "kv_indices": torch.full((7,), 900, dtype=torch.int32), "token_idx": torch.full((2, 3), -1),
            "input_ids": torch.full((4,), 77), "count": torch.full((2,), 5, dtype=torch.int32),
            "qo_indptr": torch.full((4,), 9, dtype=torch.int32), "flags": torch.ones(3, dtype=torch.bool)}
    done = synthesize_indices(vals, ["kv_indptr", "kv_indices", "token_idx", "input_ids", "count", "qo_indptr",
                                     "flags", "q"])
    assert done == ["kv_indptr", "kv_indices", "token_idx", "input_ids", "qo_indptr"]
    # kv_indptr: n = 2 segments over kv_indices' 7 elements: round(0), round(3.5) = 4, round(7)
    assert vals["kv_indptr"].tolist() == [0, 4, 7] and vals["kv_indptr"].dtype == torch.int32
    # indices: arange % the smallest first dim of the float tensors (q: 3, k_cache: 8)
    assert vals["kv_indices"].tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert vals["token_idx"].tolist() == [[0, 1, 2], [0, 1, 2]]
    assert vals["input_ids"].tolist() == [0, 1, 2, 0]
    # qo_indptr: no qo_indices, no tensor "qo": q's first dim (3) over 3 segments
    assert vals["qo_indptr"].tolist() == [0, 1, 2, 3]
    # not an index by name: zeros; bool and float inputs untouched
    assert vals["count"].tolist() == [0, 0] and vals["count"].dtype == torch.int32
    assert vals["flags"].all() and vals["q"].shape == (3, 4)


def test_synthesize_indices_without_bounds_gives_zeros():
    vals = {"kv_indptr": torch.full((3,), 4, dtype=torch.int32), "row_indices": torch.full((2,), 3)}
    assert synthesize_indices(vals, ["kv_indptr", "row_indices"]) == []
    assert vals["kv_indptr"].tolist() == [0, 0, 0] and vals["row_indices"].tolist() == [0, 0]
