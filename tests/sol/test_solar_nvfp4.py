"""Solar mode on nvfp4 problems: the packed weights and their block scales are not read
(convention 2c), a ``torch.empty`` buffer is a traced tensor (convention 1b), so what a
reference scatters into it and reads back is in the walk, and the quantiser's
``torch.zeros_like`` packing buffer is a written layer output and a fresh graph input (1c). Hand counts in each test;
docs/sol-model.md ('solar mode') gives the evidence against the official figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from solbench.sol import bound_from_counts, count_workload, load_hardware
from solbench.sol.cache import counts_from_json, counts_to_json
from solbench.spec import load_problem

from test_solar_conventions import BW, T, make_problem, solar

DEV = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "sol-execbench-dev"
B200S = load_hardware("B200_SOLAR")


def test_fp4_gemm_weights_and_their_scales_are_not_read(tmp_path):
    # The source names torch.float4_e2m1fn_x2: an fp4 problem (0.5 B per element, fp4 rate, no
    # floor). x [64, 128] bf16, w [32, 128] (a weight), s [32, 1] (its scales), bias [32].
    # Walk: x.to reads 8192 and w.to reads 4096 (roots); `* s` and `+ bias` have an intermediate
    # operand (s, bias unread); the matmul reads intermediates; the output 64*32 = 2048 is
    # written: 8192 + 4096 + 2048 = 14,336 elements. The weight root (w.to, 4096) is not read in
    # an fp4 problem: (14,336 - 4096) x 0.5 B = 5120 B.
    ref = ("import torch\n"
           "PACKED = torch.float4_e2m1fn_x2\n"
           "def run(x, w, s, bias):\n"
           "    y = x.to(torch.float32) @ (w.to(torch.float32) * s).T\n"
           "    return (y + bias).to(torch.bfloat16)\n")
    ins = {"x": T([64, 128], "bfloat16"), "w": T([32, 128], "bfloat16"), "s": T([32, 1], "float32"),
           "bias": T([32], "float32")}
    p, wl = make_problem(tmp_path, "fp4w", ins, {"y": T([64, 32], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.source_quant == {"fp4"}
    assert c.solar_graph.fused_elements() == 14_336
    assert c.solar_graph.weight_root_elements(scales=True) == 4096
    assert b.bytes_model == (14_336 - 4096) * 0.5
    assert b.overhead_ms == 0.0
    assert b.sol_ms == pytest.approx(5120 / BW * 1e3)
    # the cache round-trip keeps the figure the rule prices
    c2 = counts_from_json(counts_to_json(c))
    assert c2.solar().scaled_weight_root_elements == 4096
    assert bound_from_counts(c2, B200S, "solar").bytes_model == 5120
    # the same graph in a fp8 problem reads the weight at 2 B instead (convention 2b)
    p8, wl8 = make_problem(tmp_path, "fp8w", ins, {"y": T([64, 32], "bfloat16")},
                           ref.replace("float4_e2m1fn_x2", "float8_e4m3fn"))
    _, b8 = solar(p8, wl8)
    assert b8.bytes_model == 14_336 + 4096


def _dev_bound(name: str, index: int):
    p = load_problem(DEV / "Quant" / name)
    c = count_workload(p, p.workloads[index])
    return c, bound_from_counts(c, B200S, "solar")


@pytest.mark.skipif(not DEV.exists(), reason="../shared/datasets/sol-execbench-dev not present")
def test_quant_025_qkv_projection_hand_count():
    # Quant/025, row 13: 1 x 128 tokens, hidden 2688 (N = 128 * 2688 = 344,064 quantised
    # elements), q/k/v outputs 4096 + 256 + 256 = 4608 a token. quantize(hidden_states) reads the
    # model input in three layers (torch.abs, and two .view: 3N); the sixteen fp4-encoding masks
    # end in __setitem__ (16N written); `global_encode_scale == 0.0` writes 1. The packing
    # buffer `torch.zeros_like(x, dtype=uint8)` (x an intermediate) is a layer whose output
    # nothing reads (N written) and then a graph input that `result[..., ::2]` and
    # `result[..., 1::2]` read (N/2 + N/2): 2N (convention 1c). Each of the three GEMMs writes
    # result * global_scale into a torch.empty buffer (a dead end), the buffer's permute reads it
    # back, and the final .to(float16) is written: 3 x 128 x 4608 = 1,769,472. The packed
    # weights and scales (q/k/v .unsqueeze roots) are not read. 21N + 1 + 1,769,472 =
    # 8,994,817 elements x 0.5 B = 4,497,408.5 B / 7.67 TB/s = 0.5864 us; official 0.53688 us
    # (1.092; 1.009 before 1c). Compute: 128 x 1344 (packed K) x 4608 MACs at 7.245 PF = 0.219 us.
    c, b = _dev_bound("025_nvfp4_attention_qkv_projection", 13)
    assert "fp4" in c.source_quant  # its scales are float8_e4m3fn too: fp4 wins
    assert b.bytes_model == 4_497_408.5
    assert b.bottleneck == "dram"
    assert b.tensor_terms_ms["fp4"] == pytest.approx(2 * 128 * 1344 * 4608 / 7.245e15 * 1e3)
    assert b.sol_ms == pytest.approx(4_497_408.5 / BW * 1e3)
    assert b.sol_ms / 0.00053688 == pytest.approx(1.0922, abs=5e-4)


@pytest.mark.skipif(not DEV.exists(), reason="../shared/datasets/sol-execbench-dev not present")
def test_quant_009_patch_merge_projection_hand_count():
    # Quant/009, row 8: B = 1, 256 merged tokens of 3584 channels (N = 917,504). x.view reads
    # the input (N); the masks write 16N; `== 0.0` writes 1; the zeros_like packing buffer is
    # written by its own layer and read by the two packing slices (2N, convention 1c); the
    # GEMM's result * global_scale goes into the torch.empty buffer (written, 256 x 3584 = N),
    # the buffer's permute reads it (N), `output + bias` has an intermediate operand (bias
    # unread) and is written (N). The expanded packed weight and its scales are not read.
    # 22N + 1 = 20,185,089 elements x 0.5 B = 10,092,544.5 B / 7.67 TB/s = 1.3158 us; official
    # 1.28661 us (1.023; 0.930 before 1c).
    c, b = _dev_bound("009_nvfp4_vision_temporal_patch_merge_with_projection", 8)
    assert b.bytes_model == 10_092_544.5
    assert b.sol_ms == pytest.approx(10_092_544.5 / BW * 1e3)
    assert b.sol_ms / 0.00128661 == pytest.approx(1.0227, abs=5e-4)


@pytest.mark.skipif(not DEV.exists(), reason="../shared/datasets/sol-execbench-dev not present")
def test_quant_033_moe_routing_hand_count():
    # Quant/033, row 10: 128 tokens, hidden H = 2048, 512 experts, top 10. A token:
    # hidden_states.to(float32) reads H (2048); the sixteen fp4-encoding masks write 16H
    # (32,768); the zeros_like packing buffer is written by its own layer (H) and read by the two
    # packing slices (H/2 + H/2): 2H (4096, convention 1c); the 512 logits go into the
    # torch.empty buffer (written) and its permute reads them back (1024); the normalised top-k
    # weights' .to(bfloat16) is written (10): 39,946 elements a token, + 1 for
    # `global_encode_scale == 0.0`. The packed gate weight and its scales are not read (2c).
    # 128 x 39,946 + 1 = 5,113,089 elements x 0.5 B = 2,556,544.5 B / 7.67 TB/s = 0.3333 us;
    # official 0.3548 us (0.940; 0.843 without 1c: 35,850 a token).
    c, b = _dev_bound("033_nvfp4_moe_routing_with_topk_selection", 10)
    assert c.solar_graph.fused_elements() - c.solar_graph.weight_root_elements(scales=True) \
        == 128 * 39_946 + 1
    assert b.bytes_model == 2_556_544.5
    assert b.bottleneck == "dram"
    assert b.sol_ms / 0.0003548 == pytest.approx(0.9395, abs=5e-4)


def test_torchview_walk_applies_upstreams_quant_rewrite():
    # bench/solar_torchview_walk.py rewrites a reference as upstream does before tracing: the
    # quantised dtype literals become int8 (case 4) and, with case7, every call of a
    # `<obj>.scaled_mm(` method becomes the one-matmul stand-in, while its definition stays
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "solar_torchview_walk.py"
    spec = importlib.util.spec_from_file_location("solar_torchview_walk", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = ("class G:\n"
           "    def scaled_mm(self, a, b):\n"
           "        return a.view(torch.float4_e2m1fn_x2), b.to(torch.float8_e4m3fn)\n"
           "def get_inputs(axes, device):\n"
           "    return {}\n"
           "def run(x, w):\n"
           "    return gate_gemm.scaled_mm(mat_a=x, mat_b=w)\n")
    out = mod.rewritten_source(src, case7=True)
    assert "float4" not in out and "float8" not in out
    assert out.count("torch.int8") == 2 + mod.ONE_MATMUL.count("torch.int8")
    assert "def scaled_mm(self, a, b)" in out
    assert "return _one_matmul_scaled_mm(mat_a=x, mat_b=w)" in out
    assert out.index("def _one_matmul_scaled_mm") < out.index("def get_inputs")
    assert "gate_gemm.scaled_mm(" in mod.rewritten_source(src, case7=False)
