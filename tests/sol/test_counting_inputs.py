"""The counter's inputs are the inputs layer's (solbench.inputs): rules, roles, absent blobs
drawn, integer inputs made valid, large floats as stand-ins. Each reference reads values
(``.item()``), so it is counted on real CPU tensors, and what it reads of ``x`` tells which
values it was given; the expected values come from ``make_inputs`` (seed 0) directly."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from solbench.inputs import make_inputs
from solbench.sol import count_workload
from solbench.sol import counting
from solbench.spec import load_problem


def _problem(tmp_path: Path, inputs: dict, reference: str, roles: dict | None = None,
             sources: dict | None = None, axes: dict | None = None):
    d = tmp_path / "p"
    d.mkdir()
    defn = {"name": "p", "axes": {k: {"type": "const", "value": v} for k, v in (axes or {}).items()},
            "inputs": inputs, "outputs": {"y": {"shape": [8], "dtype": "float32"}}, "reference": reference}
    if roles:
        defn["input_roles"] = roles
    (d / "definition.json").write_text(json.dumps(defn))
    srcs = {k: {"type": "random"} for k in inputs} | (sources or {})
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": srcs}) + "\n")
    p = load_problem(d)
    return p, p.workloads[0]


def _x_read(c) -> float:
    return next(read for name, _n, _b, _cls, read in c.inputs if name == "x")


def test_declared_role_and_mask_values_are_the_inputs_layers(tmp_path):
    # idx has role index:n (uniform in [0, 64)); mask is a bool (uniform {0, 1}). Before, the
    # counter drew its own values: idx zeros (k = 1 + mask count of its own draw)
    ref = ("import torch\n"
           "def run(x, idx, mask):\n"
           "    k = int(idx.max().item()) + 1 + int(mask.sum().item())\n"
           "    return x[:k].sum(0)\n")
    p, w = _problem(tmp_path, {"x": {"shape": [128, 8], "dtype": "float32"},
                               "idx": {"shape": [5], "dtype": "int64"},
                               "mask": {"shape": [16], "dtype": "bool"}}, ref,
                    roles={"idx": "index:n"}, axes={"n": 64})
    v = make_inputs(p, w, 0)
    k = int(v["idx"].max()) + 1 + int(v["mask"].sum())
    assert k > 1 + 16 // 4  # a draw of the role, not zeros
    c = count_workload(p, w)
    assert c.real_tensors and c.synthesized == []
    assert _x_read(c) == k * 8 * 4  # x[:k]: k rows of 8 float32


def test_absent_blobs_are_drawn_and_indices_made_valid(tmp_path):
    # a paged layout whose blob is absent: kv_indptr [3] and kv_indices [7] are synthesized
    # (2 segments over 7 indices: [0, 4, 7]; indices arange % 8, the smallest float first dim);
    # n, an int input of no index name that upstream draws from [-1024, 1024), is zeros
    ref = ("import torch\n"
           "def run(x, kv_indptr, kv_indices, n):\n"
           "    e = int(kv_indptr[1].item()) + int(n.sum().item())\n"
           "    return x[kv_indices[:e]].sum(0)\n")
    blob = {"type": "safetensors", "path": "blobs/absent.safetensors"}
    p, w = _problem(tmp_path, {"x": {"shape": [8, 8], "dtype": "float32"},
                               "kv_indptr": {"shape": [3], "dtype": "int32"},
                               "kv_indices": {"shape": [7], "dtype": "int32"},
                               "n": {"shape": [2], "dtype": "int32"}}, ref,
                    sources={"kv_indptr": dict(blob, tensor_key="kv_indptr"),
                             "kv_indices": dict(blob, tensor_key="kv_indices")})
    c = count_workload(p, w)
    assert c.real_tensors
    assert c.synthesized == ["kv_indptr", "kv_indices"]
    # x[kv_indices[:4]] gathers rows 0..3 of x: 4 rows of 8 float32
    assert _x_read(c) == 4 * 8 * 4


def test_large_float_inputs_are_stand_ins_in_real_runs(tmp_path):
    p, w = _problem(tmp_path, {"x": {"shape": [4096, 4096], "dtype": "float32"},
                               "w": {"shape": [16], "dtype": "float32"}},
                    "import torch\ndef run(x, w):\n    return x[: int(w.abs().sum().item() > 0)].sum(0)\n")
    c = counting.Counts(mode="real", real_tensors=True)
    v = counting._declared_inputs(p, w, real=True, counts=c)
    assert counting._is_stand_in(v["x"]) and v["x"].shape == (4096, 4096)
    # small floats are the inputs layer's draw (seed 0)
    assert torch.equal(v["w"], make_inputs(p, w, 0, substitute=lambda q: torch.empty(0) if q.name == "x" else None)["w"])
    # shape-only runs: placeholders of every tensor, made under the run's mode
    shapes = counting._declared_inputs(p, w, real=False, counts=c)
    assert shapes["x"] == counting._Placeholder((4096, 4096), torch.float32)
    assert counting._declared_bytes(p, w) == 16 * 4  # the stand-in costs nothing
