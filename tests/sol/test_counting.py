"""Counting and the bound on hand-worked problems (definitions written here, run on CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from solbench.sol import bound, bound_from_counts, count_workload, load_hardware
from solbench.spec import load_problem

H200 = load_hardware("H200")


def make_problem(tmp_path: Path, name: str, inputs: dict, outputs: dict, reference: str,
                 axes: dict | None = None, workload_axes: dict | None = None,
                 scalars: dict | None = None, allow_tf32: bool | None = None):
    d = tmp_path / name
    d.mkdir()
    defn = {"name": name, "axes": axes or {}, "inputs": inputs, "outputs": outputs,
            "reference": reference}
    if allow_tf32 is not None:
        defn["allow_tf32"] = allow_tf32
    (d / "definition.json").write_text(json.dumps(defn))
    srcs = {k: {"type": "random"} for k in inputs}
    for k, v in (scalars or {}).items():
        srcs[k] = {"type": "scalar", "value": v}
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": workload_axes or {},
                                                  "inputs": srcs}) + "\n")
    p = load_problem(d)
    return p, p.workloads[0]


def T(shape, dtype):
    return {"shape": shape, "dtype": dtype}


def test_gemm_bf16(tmp_path):
    M, K, N = 256, 512, 128
    p, w = make_problem(tmp_path, "gemm", {"a": T([M, K], "bfloat16"), "b": T([K, N], "bfloat16")},
                        {"c": T([M, N], "bfloat16")},
                        "import torch\ndef run(a, b):\n    return a @ b\n")
    c = count_workload(p, w)
    assert c.mode == "meta" and not c.real_tensors  # the meta device first, FakeTensors if it fails
    assert c.mma_flops["bf16"] == 2 * M * N * K == 33_554_432
    assert c.bytes_fused == (M * K + K * N + M * N) * 2 == 458_752
    b = bound(p, w, "H200")
    assert b.terms_ms["tensor"] == pytest.approx(33_554_432 / 989.4e12 * 1e3)
    assert b.terms_ms["dram"] == pytest.approx(458_752 / 4.8e12 * 1e3)
    assert b.sol_ms == max(b.terms_ms.values())
    assert b.bottleneck == "dram"  # AI = 73 FLOP/B, below H200's ridge (206)
    assert b.arithmetic_intensity == pytest.approx(33_554_432 / 458_752)
    assert not b.unknown_ops


def test_batched_gemm_fp32_is_priced_at_fp32_accurate_emulation_unless_tf32(tmp_path):
    B, M, K, N = 4, 64, 32, 16
    ref = "import torch\ndef run(a, b):\n    return torch.bmm(a, b)\n"
    ins = {"a": T([B, M, K], "float32"), "b": T([B, K, N], "float32")}
    p, w = make_problem(tmp_path, "bmm", ins, {"c": T([B, M, N], "float32")}, ref)
    b = bound(p, w, "H200")
    flops = 2 * B * M * N * K
    # fp32 accuracy: the fastest of 3xTF32 (494.7/3 = 164.9 T), BF16x6 (989.4/6 = 164.9 T) and
    # the CUDA cores (66.9 T) on the H200; never plain TF32 (494.7 T)
    assert b.flops["tensor_fp32"] == flops == 262_144
    assert b.terms_ms["tensor"] == pytest.approx(flops / (989.4e12 / 6) * 1e3)
    assert b.mma_pricing["fp32"]["method"].startswith("BF16x6") or "3xTF32" in b.mma_pricing["fp32"]["method"]
    assert b.terms_ms["cuda"] == 0
    p2, w2 = make_problem(tmp_path, "bmm_tf32", ins, {"c": T([B, M, N], "float32")}, ref, allow_tf32=True)
    b2 = bound(p2, w2, "H200")
    assert b2.flops["tensor_fp32"] == flops and "allow_tf32" in b2.mma_pricing["fp32"]["method"]
    assert b2.terms_ms["tensor"] == pytest.approx(flops / 494.7e12 * 1e3)


def test_conv2d(tmp_path):
    N, C, H, W, O, k = 2, 3, 32, 32, 8, 3
    ref = ("import torch\nimport torch.nn.functional as F\n"
           "def run(x, w):\n    return F.conv2d(x, w, padding=1)\n")
    p, wl = make_problem(tmp_path, "conv", {"x": T([N, C, H, W], "float16"), "w": T([O, C, k, k], "float16")},
                         {"y": T([N, O, H, W], "float16")}, ref)
    c = count_workload(p, wl)
    macs = N * O * H * W * C * k * k
    assert c.mma_flops["fp16"] == 2 * macs == 884_736
    assert c.bytes_fused == 2 * (N * C * H * W + O * C * k * k + N * O * H * W)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_causal_halves_work(tmp_path, causal):
    B, Hh, L, E = 1, 2, 128, 64
    ref = ("import torch\nimport torch.nn.functional as F\n"
           f"def run(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v, is_causal={causal})\n")
    spec = T([B, Hh, L, E], "bfloat16")
    p, w = make_problem(tmp_path, f"sdpa{causal}", {"q": spec, "k": spec, "v": spec}, {"o": spec}, ref)
    c = count_workload(p, w)
    full = 2 * B * Hh * L * L * (E + E)
    assert c.mma_flops_full["bf16"] == full == 8_388_608
    pairs = L * (L + 1) // 2 if causal else L * L
    assert c.mma_flops["bf16"] == 2 * B * Hh * pairs * (E + E)
    assert c.sfu_ops == B * Hh * pairs
    assert c.attention_calls[0]["causal"] is causal
    # solar counts causal attention in full
    sb = bound_from_counts(c, load_hardware("B200_SOLAR"), "solar")
    assert sb.solar_macs == full / 2


def test_softmax(tmp_path):
    ref = "import torch\ndef run(x):\n    return torch.softmax(x, dim=-1)\n"
    p, w = make_problem(tmp_path, "softmax", {"x": T([64, 1000], "float32")}, {"y": T([64, 1000], "float32")}, ref)
    c = count_workload(p, w)
    n = 64 * 1000
    assert c.cuda_flops["fp32"] == 4 * n       # max, subtract, sum, divide
    assert c.sfu_ops == n                      # one exp per element
    assert c.bytes_fused == 2 * n * 4
    b = bound(p, w, "H200")
    assert b.terms_ms["sfu"] == pytest.approx(n / (4.18e12 + 66.9e12 / 8) * 1e3)


def test_layer_norm_and_rms_norm(tmp_path):
    R, D = 8, 256
    ref = ("import torch\nimport torch.nn.functional as F\n"
           "def run(x, w, b):\n    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)\n")
    p, wl = make_problem(tmp_path, "ln", {"x": T([R, D], "float32"), "w": T([D], "float32"), "b": T([D], "float32")},
                         {"y": T([R, D], "float32")}, ref)
    c = count_workload(p, wl)
    assert c.cuda_flops["fp32"] == 7 * R * D
    assert c.bytes_fused == (R * D * 2 + 2 * D) * 4
    # hand-written RMS norm: pow(2) 1 mul, mean 1 add, +eps 1 (per row), rsqrt 1 SFU (per row),
    # x*r 1, *w 1 per element
    ref2 = ("import torch\n"
            "def run(x, w):\n    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n    return x * r * w\n")
    p2, w2 = make_problem(tmp_path, "rms", {"x": T([R, D], "float32"), "w": T([D], "float32")},
                          {"y": T([R, D], "float32")}, ref2)
    c2 = count_workload(p2, w2)
    assert c2.cuda_flops["fp32"] == R * D * 4 + R
    assert c2.sfu_ops == R
    assert c2.bytes_fused == (2 * R * D + D) * 4


def test_embedding_bag_reads_only_gathered_rows(tmp_path):
    V, D, nidx, bags = 1000, 64, 200, 10
    ref = ("import torch\nimport torch.nn.functional as F\n"
           "def run(weight, idx, offsets):\n    return F.embedding_bag(idx, weight, offsets, mode='sum')\n")
    ins = {"weight": T([V, D], "float32"), "idx": T([nidx], "int64"), "offsets": T([bags], "int64")}
    p, w = make_problem(tmp_path, "ebag", ins, {"y": T([bags, D], "float32")}, ref)
    c = count_workload(p, w)
    assert c.cuda_flops["fp32"] == nidx * D
    gathered = nidx * D * 4
    assert c.bytes_fused == gathered + nidx * 8 + bags * 8 + bags * D * 4
    assert c.bytes_io == V * D * 4 + nidx * 8 + bags * 8 + bags * D * 4  # solar: whole table


def test_mixed_dtypes_sized_per_tensor(tmp_path):
    # bf16 activations, int64 indices, fp32 statistics output: each at its own width
    ref = ("import torch\n"
           "def run(x, idx):\n    y = x[idx]\n    return y, y.float().sum(-1)\n")
    p, w = make_problem(tmp_path, "mixed", {"x": T([100, 32], "bfloat16"), "idx": T([10], "int64")},
                        {"y": T([10, 32], "bfloat16"), "s": T([10], "float32")}, ref)
    c = count_workload(p, w)
    assert c.bytes_fused == 10 * 32 * 2 + 10 * 8 + 10 * 32 * 2 + 10 * 4
    solar = bound_from_counts(c, load_hardware("B200_SOLAR"), "solar")
    # upstream's layer walk at one 2-byte width: x[idx] reads the 320 gathered elements of x and
    # the 10 indices; y is returned but also read by .float(), so it is not a graph output; the
    # 10 sums are. (320 + 10 + 10) x 2 B
    assert solar.bytes_model == (10 * 32 + 10 + 10) * 2 == 680


def test_unknown_op_is_listed_not_free(tmp_path):
    ref = "import torch\ndef run(x):\n    return torch.special.bessel_j0(x)\n"
    p, w = make_problem(tmp_path, "bessel", {"x": T([16], "float32")}, {"y": T([16], "float32")}, ref)
    c = count_workload(p, w)
    assert c.unknown_ops == {"special_bessel_j0": 1}


def test_data_dependent_reference_falls_back_to_real(tmp_path):
    ref = ("import torch\n"
           "def run(x):\n    n = int((x > 0).sum().item())\n    return x[:max(n, 1)] * 2\n")
    p, w = make_problem(tmp_path, "dd", {"x": T([64], "float32")}, {"y": T([64], "float32")}, ref)
    c = count_workload(p, w)
    assert c.real_tensors and c.mode == "real"
    b = bound(p, w, "H200")
    assert b.real_tensors


def test_fp8_scaled_mm(tmp_path):
    M, K, N = 32, 64, 48
    ref = ("import torch\n"
           "def run(a, b, sa, sb):\n"
           "    return torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16)\n")
    ins = {"a": T([M, K], "float8_e4m3fn"), "b": T([N, K], "float8_e4m3fn"), "sa": T([], "float32"),
           "sb": T([], "float32")}
    p, w = make_problem(tmp_path, "fp8mm", ins, {"c": T([M, N], "bfloat16")}, ref)
    c = count_workload(p, w)
    assert c.mma_flops["fp8"] == 2 * M * N * K
    assert c.bytes_fused == M * K + N * K + 4 + 4 + M * N * 2
    b = bound(p, w, "H200")
    assert b.tensor_terms_ms["fp8"] == pytest.approx(2 * M * N * K / 1978.9e12 * 1e3)


def test_packed_fp4_input_half_byte_per_value(tmp_path):
    # a packed e2m1 tensor of 64 x 32 stored elements holds 64 x 64 values in 2048 bytes
    ref = ("import torch\n"
           "def run(w, x):\n    return x * 2\n")
    p, wl = make_problem(tmp_path, "fp4", {"w": T([64, 32], "float4_e2m1fn_x2"), "x": T([8], "float32")},
                         {"y": T([8], "float32")}, ref)
    c = count_workload(p, wl)
    assert c.bytes_io == 64 * 32 * 1 + 8 * 4 + 8 * 4
    assert "w" in " ".join(c.notes)  # never read by this reference: not in the fused bytes
    assert c.bytes_fused == 8 * 4 + 8 * 4
    solar = bound_from_counts(c, load_hardware("B200_SOLAR"), "solar")
    # upstream reads the precision from the reference source, which names no fp4 dtype: a 16-bit
    # problem; w is never read. x * 2 reads 8 and writes 8 elements at 2 B
    assert solar.bytes_model == (8 + 8) * 2
    assert solar.overhead_ms == pytest.approx(0.0004)


def test_kernelbench_module_parameters_are_inputs(tmp_path):
    f = tmp_path / "linear_relu.py"
    f.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, i, o):\n        super().__init__()\n        self.fc = nn.Linear(i, o)\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x))\n"
        "def get_inputs():\n    return [torch.randn(64, 256)]\n"
        "def get_init_inputs():\n    return [256, 128]\n")
    p = load_problem(f)
    b = bound(p, p.workloads[0], "H200")
    assert b.flops["tensor_fp32"] == 2 * 64 * 128 * 256
    assert b.flops["cuda_fp32"] == 64 * 128 * 2  # bias add + relu
    # x + weight + bias + output, fp32
    assert b.bytes_fused == (64 * 256 + 128 * 256 + 128 + 64 * 128) * 4 == 229_888


def test_values_read_by_item_and_truth_tests_are_reads_of_those_elements(tmp_path):
    """The reference's control flow reads lens[2] (.item()) and flags[0] (a truth test): an
    implementation must read those elements too, and only those. Hand-worked (real tensors:
    the value reads end the meta and fake runs): x[:8] read, 8 x 4 B; lens[2], 4 B; flags[0],
    1 B; y written, 8 x 4 B."""
    ref = ("import torch\n"
           "def run(x, lens, flags):\n"
           "    n = int(lens[2].item()) + 8\n"
           "    if flags[0]:\n"
           "        n = n + 0\n"
           "    return x[:n] * 2\n")
    p, w = make_problem(tmp_path, "reads", {"x": T([64], "float32"), "lens": T([4], "int32"),
                                            "flags": T([3], "bool")}, {"y": T([8], "float32")}, ref)
    c = count_workload(p, w)
    assert c.real_tensors
    assert {name: read for name, _, _, _, read in c.inputs} == {"x": 32.0, "lens": 4.0, "flags": 1.0}
    assert not any("never read" in n for n in c.notes)
    assert c.bytes_fused == 32 + 4 + 1 + 32
