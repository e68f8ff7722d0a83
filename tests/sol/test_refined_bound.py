"""Refined-model conventions, each on a hand-worked problem (docs/sol-model.md, "refined").

Includes the four public problems of issue 12 at the shapes their first workload uses:
L1/001 and L1/017 from the dev dataset (skipped when ../shared is absent), and equivalents of
L1/004 (attention output projection backward) and L1/018 (RoPE + QK norm + KV-cache update)
written here from their descriptions (the dataset files are not copied).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from solbench.sol import bound, count_workload, load_hardware



def T(shape, dtype):
    return {"shape": shape, "dtype": dtype}


def make_problem(tmp_path: Path, name: str, inputs: dict, outputs: dict, reference: str,
                 scalars: dict | None = None):
    from solbench.spec import load_problem

    d = tmp_path / name
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({"name": name, "axes": {}, "inputs": inputs,
                                                   "outputs": outputs, "reference": reference}))
    srcs = {k: {"type": "random"} for k in inputs}
    for k, v in (scalars or {}).items():
        srcs[k] = {"type": "scalar", "value": v}
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": srcs}) + "\n")
    p = load_problem(d)
    return p, p.workloads[0]

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SOLBENCH_SHARED", ROOT.parent / "shared"))
DEV = SHARED / "datasets" / "sol-execbench-dev"
H200 = load_hardware("H200")
BW = 4.8e12          # H200 DRAM bytes/s (datasheet)
BF16 = 989.4e12      # H200 dense bf16 tensor FLOP/s


# -- convention 2: precision from the inputs' dtypes ------------------------------------------

BACKWARD_004 = """import torch
def run(grad_output, attn_output, o_proj_weight):
    # bf16 in, upcast by the reference; B,S,H -> grads of the output projection
    B, S, Hd = grad_output.shape
    g = grad_output.reshape(B * S, Hd).to(torch.float32)
    a = attn_output.reshape(B * S, -1).to(torch.float32)
    w = o_proj_weight.to(torch.float32)
    grad_weight = g.t().mm(a)
    grad_attn = g.mm(w).reshape(B, S, -1)
    return grad_attn.to(torch.bfloat16), grad_weight.to(torch.bfloat16)
"""


def test_l1_004_equivalent_bf16_inputs_get_the_bf16_tensor_rate_despite_the_upcast(tmp_path):
    B, S, Hd, I = 1, 2048, 4096, 4096
    p, w = make_problem(tmp_path, "p004", {"grad_output": T([B, S, Hd], "bfloat16"),
                                           "attn_output": T([B, S, I], "bfloat16"),
                                           "o_proj_weight": T([Hd, I], "bfloat16")},
                        {"grad_attn": T([B, S, I], "bfloat16"), "grad_weight": T([Hd, I], "bfloat16")},
                        BACKWARD_004)
    b = bound(p, w, "H200")
    flops = 2 * (2 * B * S * Hd * I)                       # two GEMMs = 137.4 GFLOP
    assert flops == 137_438_953_472
    assert b.flops["tensor_bf16"] == flops
    assert b.terms_ms["tensor"] == pytest.approx(flops / BF16 * 1e3)   # 0.1389 ms
    assert b.sol_ms == pytest.approx(0.138911, rel=1e-4)
    # not the fp32 CUDA-core price of the old model (2.054 ms)
    assert b.sol_ms < 0.15


def test_mixed_fp32_and_bf16_operands_take_the_split_rate(tmp_path):
    M, K, N = 256, 512, 128
    p, w = make_problem(tmp_path, "mixed", {"a": T([M, K], "bfloat16"), "b": T([K, N], "float32")},
                        {"c": T([M, N], "float32")},
                        "import torch\ndef run(a, b):\n    return a.float() @ b\n")
    b = bound(p, w, "H200")
    # the bf16 operand is exact in BF16: BF16x3 split of the fp32 one = 989.4/3 = 329.8 T, faster
    # than 2xTF32 (494.7/2) and the CUDA cores (66.9)
    assert b.mma_pricing["fp32xbf16"]["flop_per_s"] == pytest.approx(989.4e12 / 3)
    assert b.terms_ms["tensor"] == pytest.approx(2 * M * N * K / (989.4e12 / 3) * 1e3)


def test_fp32_problem_on_b200_takes_the_fastest_fp32_accurate_method(tmp_path):
    M = 1024
    p, w = make_problem(tmp_path, "f32", {"a": T([M, M], "float32"), "b": T([M, M], "float32")},
                        {"c": T([M, M], "float32")}, "import torch\ndef run(a, b):\n    return a @ b\n")
    b = bound(p, w, "B200")
    # B200 datasheet: tf32 1100 T / 3 = 366.7 T; bf16 2250 T / 6 = 375 T; fp32 CUDA 80 T
    assert b.mma_pricing["fp32"]["flop_per_s"] == pytest.approx(375e12)
    assert "BF16x6" in b.mma_pricing["fp32"]["method"]


def test_fp8_values_with_broadcast_scales_keep_the_fp8_rate(tmp_path):
    M, K, N = 256, 512, 1024
    ref = ("import torch\ndef run(x, xs, w, ws):\n"
           "    a = x.to(torch.float32) * xs\n    bt = w.to(torch.float32) * ws\n"
           "    return (a @ bt.t()).to(torch.bfloat16)\n")
    p, wl = make_problem(tmp_path, "fp8", {"x": T([M, K], "float8_e4m3fn"), "xs": T([M, 1], "float32"),
                                           "w": T([N, K], "float8_e4m3fn"), "ws": T([N, 1], "float32")},
                         {"y": T([M, N], "bfloat16")}, ref)
    b = bound(p, wl, "H200")
    assert b.flops["tensor_fp8"] == 2 * M * N * K
    assert b.terms_ms["tensor"] == pytest.approx(2 * M * N * K / 1978.9e12 * 1e3)


def test_an_fp32_addend_raises_the_class(tmp_path):
    # a + b is not a scale: an fp32 addend makes the operand genuinely fp32
    M = 128
    ref = "import torch\ndef run(a, r, b):\n    return (a.float() + r) @ b.float()\n"
    p, w = make_problem(tmp_path, "add", {"a": T([M, M], "bfloat16"), "r": T([M, M], "float32"),
                                          "b": T([M, M], "bfloat16")}, {"c": T([M, M], "float32")}, ref)
    c = count_workload(p, w)
    assert dict(c.mma_by_precision) == {"fp32xbf16": 2 * M ** 3}


# -- convention 3: compulsory bytes, outputs aliasing inputs --------------------------------

ROPE_018 = """import torch
def _rms(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w
def _rot(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)
def run(query, key, value, position_ids, key_cache, value_cache, cache_position,
        q_norm_weight, k_norm_weight, inv_freq, rms_norm_eps):
    q = _rms(query, q_norm_weight, rms_norm_eps)
    k = _rms(key, k_norm_weight, rms_norm_eps)
    freqs = position_ids[:, :, None].float() * inv_freq[None, None, :]
    emb = torch.cat([freqs, freqs], -1)
    cos, sin = emb.cos().to(q.dtype)[:, None], emb.sin().to(q.dtype)[:, None]
    q_rot = q * cos + _rot(q) * sin
    k_rot = k * cos + _rot(k) * sin
    UPDATE
    return q_rot, k_rot, kc, vc
"""
UPDATES = {
    "in_place": "key_cache[:, :, cache_position] = k_rot\n    value_cache[:, :, cache_position] = value\n"
                "    kc, vc = key_cache, value_cache",
    "clone": "kc = key_cache.clone()\n    kc[:, :, cache_position] = k_rot\n    vc = value_cache.clone()\n"
             "    vc[:, :, cache_position] = value",
    "index_copy": "kc = key_cache.index_copy(2, cache_position, k_rot)\n"
                  "    vc = value_cache.index_copy(2, cache_position, value)",
}


@pytest.mark.parametrize("variant", sorted(UPDATES))
def test_l1_018_equivalent_kv_cache_update_counts_only_the_new_rows(tmp_path, variant):
    # issue 12's shapes: 96 query heads, 8 KV heads, head_dim 128, a 262,144-position bf16 cache
    # (537 MB each), one decode token
    B, Hq, Hkv, S, D, P = 1, 96, 8, 1, 128, 262_144
    ins = {"query": T([B, Hq, S, D], "bfloat16"), "key": T([B, Hkv, S, D], "bfloat16"),
           "value": T([B, Hkv, S, D], "bfloat16"), "position_ids": T([B, S], "int64"),
           "key_cache": T([B, Hkv, P, D], "bfloat16"), "value_cache": T([B, Hkv, P, D], "bfloat16"),
           "cache_position": T([S], "int64"), "q_norm_weight": T([D], "bfloat16"),
           "k_norm_weight": T([D], "bfloat16"), "inv_freq": T([D // 2], "float32"),
           "rms_norm_eps": {"shape": None, "dtype": "float32"}}
    outs = {"q_rot": T([B, Hq, S, D], "bfloat16"), "k_rot": T([B, Hkv, S, D], "bfloat16"),
            "kc": T([B, Hkv, P, D], "bfloat16"), "vc": T([B, Hkv, P, D], "bfloat16")}
    p, w = make_problem(tmp_path, f"p018_{variant}", ins, outs,
                        ROPE_018.replace("UPDATE", UPDATES[variant]), scalars={"rms_norm_eps": 1e-6})
    c = count_workload(p, w)
    reads = {n: r for n, _, _, _, r in c.inputs}
    assert reads["key_cache"] == reads["value_cache"] == 0          # never needs the old cache
    read = (Hq + 2 * Hkv) * D * 2 + 8 + 8 + 2 * D * 2 + (D // 2) * 4  # 29,456 B
    written = (Hq + 3 * Hkv) * D * 2                                 # q, k, and one row per cache: 30,720 B
    assert c.bytes_fused == read + written == 60_176
    b = bound(p, w, "H200")
    assert b.bottleneck == "dram"
    assert b.sol_ms == pytest.approx(60_176 / BW * 1e3)              # 1.25e-5 ms, not 0.447 ms
    assert b.t_certain_ms == 0.0                                      # 30 KB of output fits in L2


def test_an_output_returned_unchanged_from_an_input_writes_nothing(tmp_path):
    p, w = make_problem(tmp_path, "ident", {"x": T([1024, 1024], "float32"), "y": T([1024], "float32")},
                        {"x2": T([1024, 1024], "float32"), "s": T([1024], "float32")},
                        "import torch\ndef run(x, y):\n    return x, y * 2\n")
    c = count_workload(p, w)
    # x is neither read nor written: an implementation returns the input itself
    assert c.bytes_fused == 1024 * 4 + 1024 * 4


def test_an_output_that_is_a_view_of_an_input_writes_nothing(tmp_path):
    p, w = make_problem(tmp_path, "view", {"x": T([64, 256], "float32")}, {"y": T([64, 32], "float32")},
                        "import torch\ndef run(x):\n    return x[:, :32]\n")
    c = count_workload(p, w)
    assert c.bytes_fused == 0 and c.bytes_outputs_certain == 0


def test_a_sliced_input_is_read_only_where_the_slice_reaches(tmp_path):
    R, C, k = 512, 1024, 128
    p, w = make_problem(tmp_path, "slice", {"x": T([R, C], "bfloat16")}, {"y": T([R, k], "bfloat16")},
                        "import torch\ndef run(x):\n    return x[:, :k] * 2\n".replace("k]", f"{k}]"))
    c = count_workload(p, w)
    assert c.bytes_fused == R * k * 2 + R * k * 2


def test_certain_floor_is_the_output_beyond_l2_at_peak_bandwidth(tmp_path):
    n = 64 << 20   # 64 Mi fp32 elements = 256 MiB written
    p, w = make_problem(tmp_path, "big", {"x": T([n], "float32")}, {"y": T([n], "float32")},
                        "import torch\ndef run(x):\n    return x * 2\n")
    b = bound(p, w, "H200")
    assert b.t_certain_ms == pytest.approx((n * 4 - 62_914_560) / BW * 1e3)
    assert b.t_certain_ms < b.sol_ms


# -- the two dev problems of the issue, at their first workload -------------------------------

def _dev(name):
    d = DEV / "L1" / name
    if not d.exists():
        pytest.skip(f"dev dataset absent ({d})")
    from solbench.spec import load_problem

    return load_problem(d)


def test_l1_001_first_workload_by_hand():
    p = _dev("001_attention_softmax_dropout_value_matmul_backward")
    b = bound(p, p.workloads[0], "H200")
    Bt, H, Hkv, Sq, Skv, D = 4, 80, 8, 256, 256, 128
    flops = 2 * (2 * Bt * H * Sq * Skv * D)                 # the two GEMMs, per query head
    assert b.flops["tensor_bf16"] == flops == 10_737_418_240
    elems16 = (Bt * Sq * H * D + 3 * Bt * H * Sq * Skv + 2 * Bt * Hkv * Skv * D)
    mask = Bt * H * Sq * Skv                                # bool, 1 B
    assert b.bytes_fused == elems16 * 2 + mask == 171_966_464
    assert b.sol_ms == pytest.approx(171_966_464 / BW * 1e3)   # 0.0358 ms < 0.142 ms measured
    assert b.bottleneck == "dram"


def test_l1_017_first_workload_by_hand():
    p = _dev("017_moe_expert_swiglu_with_down_projection_backward")
    b = bound(p, p.workloads[0], "H200")
    Tn, Hd, I = 3089, 2048, 768
    flops = 6 * 2 * Tn * Hd * I                             # six GEMMs of T x H x I
    assert b.flops["tensor_bf16"] == flops == 58_302_922_752
    assert b.bytes_fused == (3 * Tn * Hd + 6 * I * Hd + 5 * Tn * I) * 2 == 80_555_520
    assert b.sol_ms == pytest.approx(flops / BF16 * 1e3)   # 0.0589 ms < 0.437 ms measured
    assert b.bottleneck == "tensor"
