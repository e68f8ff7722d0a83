"""solar mode: upstream SOLAR's conventions (docs/sol-model.md), each on a tiny hand-worked problem.

Solar-mode bytes are upstream's layer walk (solbench.sol.solar_graph) at one width per problem:
2 B (16-bit and fp32 problems), 1 B (the source names a fp8 dtype), 0.5 B (it names fp4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from solbench.sol import bound_from_counts, count_workload, load_hardware
from solbench.sol import counting
from solbench.sol.cache import counts_from_json, counts_to_json
from solbench.sol.solar_graph import SolarGraphMode, _matmul_macs
from solbench.spec import load_problem

B200S = load_hardware("B200_SOLAR")
BW = 7.67e12


def make_problem(tmp_path: Path, name: str, inputs: dict, outputs: dict, reference: str,
                 axes: dict | None = None):
    d = tmp_path / name
    d.mkdir()
    defn = {"name": name, "axes": axes or {}, "inputs": inputs, "outputs": outputs,
            "reference": reference}
    (d / "definition.json").write_text(json.dumps(defn))
    srcs = {k: {"type": "random"} for k in inputs}
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": srcs}) + "\n")
    p = load_problem(d)
    return p, p.workloads[0]


def T(shape, dtype):
    return {"shape": shape, "dtype": dtype}


def solar(p, w):
    c = count_workload(p, w)
    return c, bound_from_counts(c, B200S, "solar")


def test_layer_with_an_intermediate_operand_reads_nothing(tmp_path):
    # x, r: [4, 8] bf16 (N = 32), w: [8]. Layers: to(x) reads N (all operands are inputs);
    # pow/mean/mul read intermediates; w * y and r + (...) each have an intermediate operand,
    # so neither w nor r is counted (upstream's per-layer rule); the output is written: N.
    ref = ("import torch\n"
           "def run(x, r, w):\n"
           "    y = x.float()\n"
           "    y = y * y.pow(2).mean(-1, keepdim=True)\n"
           "    return r + (w * y).to(x.dtype)\n")
    p, wl = make_problem(tmp_path, "postnorm", {"x": T([4, 8], "bfloat16"), "r": T([4, 8], "bfloat16"),
                                                "w": T([8], "bfloat16")}, {"o": T([4, 8], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 32 + 32
    assert b.bytes_model == 64 * 2
    assert b.sol_ms == pytest.approx(128 / BW * 1e3 + 0.0004)
    # refined reads every input once and writes the output, each at its own width
    assert c.bytes_fused == (32 + 32 + 8) * 2 + 32 * 2


def test_repeated_operand_and_dead_end_outputs(tmp_path):
    # x: [4, 4] (N = 16). x * x reads x twice (2N); x.abs() reads N and its result is never used
    # (a dead end: written, N); t is returned but also summed, so it is not a graph output;
    # the 0-d sum is (1). 2N + N + N + 1 = 65 elements.
    ref = ("import torch\n"
           "def run(x):\n"
           "    t = x * x\n"
           "    u = t.sum()\n"
           "    _ = x.abs()\n"
           "    return t, u\n")
    p, wl = make_problem(tmp_path, "dead", {"x": T([4, 4], "bfloat16")},
                         {"t": T([4, 4], "bfloat16"), "u": T([], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 65
    assert b.bytes_model == 130


def test_indexing_reads_what_it_selects(tmp_path):
    # x[:, :2] of a [4, 8] input reads 8 elements; x * 2 of that writes 8: 16 elements
    ref = "import torch\ndef run(x):\n    return x[:, :2] * 2\n"
    p, wl = make_problem(tmp_path, "slice", {"x": T([4, 8], "bfloat16")}, {"y": T([4, 2], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert b.bytes_model == 16 * 2


def test_linear_reads_only_its_activation(tmp_path):
    # F.linear(x, w, b) with x [4, 64], w [32, 64], b [32], all model inputs: the layer reads x
    # (256) but not w or b (parameters in the kernels the official table was computed from);
    # output 4 x 32 = 128 written. MACs 4*64*32 = 8192.
    ref = "import torch\nimport torch.nn.functional as F\ndef run(x, w, b):\n    return F.linear(x, w, b)\n"
    p, wl = make_problem(tmp_path, "lin", {"x": T([4, 64], "bfloat16"), "w": T([32, 64], "bfloat16"),
                                           "b": T([32], "bfloat16")}, {"y": T([4, 32], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 256 + 128
    assert b.solar_macs == 8192
    # x @ w.t() instead: the transpose layer reads w (2048); the matmul then has an intermediate
    # operand, so x is not counted; output 128
    ref2 = "import torch\ndef run(x, w, b):\n    return x @ w.t()\n"
    p2, wl2 = make_problem(tmp_path, "mm", {"x": T([4, 64], "bfloat16"), "w": T([32, 64], "bfloat16"),
                                            "b": T([32], "bfloat16")}, {"y": T([4, 32], "bfloat16")}, ref2)
    c2, _ = solar(p2, wl2)
    assert c2.solar_graph.fused_elements() == 2048 + 128


def test_linear_fed_by_a_layer_reads_its_activation_from_memory(tmp_path):
    # x [4, 8] bf16 (N = 32); h = x * 2 (the mul reads x: 32); two F.linear of h with
    # wk, wv [2, 8] (outputs 4 x 2 = 8 each, dead ends: 16). A linear was a module node upstream,
    # so an activation another layer produced is written once by its producer (32) and read by
    # each linear (2 x 32): 32 + 16 + 32 + 64 = 144 elements (L1/073's norm -> K/V projections:
    # x + normalized written + read twice + outputs = 4.25 N = official). Without this rule the
    # walk counted 48.
    ref = ("import torch\nimport torch.nn.functional as F\n"
           "def run(x, wk, wv):\n"
           "    h = x * 2\n"
           "    return F.linear(h, wk), F.linear(h, wv)\n")
    p, wl = make_problem(tmp_path, "kv", {"x": T([4, 8], "bfloat16"), "wk": T([2, 8], "bfloat16"),
                                          "wv": T([2, 8], "bfloat16")},
                         {"k": T([4, 2], "bfloat16"), "v": T([4, 2], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 144
    assert b.bytes_model == 288
    # the count cache (solbench sol --cache, the benches) keeps the rule's result
    back = counts_from_json(json.loads(json.dumps(counts_to_json(c))))
    assert back.solar().fused_elements == 144
    # a chain linear -> gelu -> linear (L1/045): x [4, 8] read by the first linear (32, a model
    # input), its [4, 16] output fused into the GELU (not written), the GELU's output written and
    # read by the second linear (2 x 64), output [4, 8] written (32): 32 + 128 + 32 = 192
    ref2 = ("import torch\nimport torch.nn.functional as F\n"
            "def run(x, w1, w2):\n"
            "    return F.linear(F.gelu(F.linear(x, w1)), w2)\n")
    p2, wl2 = make_problem(tmp_path, "ffn", {"x": T([4, 8], "bfloat16"), "w1": T([16, 8], "bfloat16"),
                                             "w2": T([8, 16], "bfloat16")}, {"y": T([4, 8], "bfloat16")}, ref2)
    c2, _ = solar(p2, wl2)
    assert c2.solar_graph.fused_elements() == 192
    # one half of a chunk feeds a linear, the other an elementwise layer: only the linear's half
    # is written and read. x [4, 8] read by the mul (32); halves [4, 4]; a written (16) and read
    # by the linear (16), its output [4, 2] (8); b * 3 fused, its output written (16):
    # 32 + 16 + 16 + 8 + 16 = 88 (writing the whole chunk output gave 104)
    ref3 = ("import torch\nimport torch.nn.functional as F\n"
            "def run(x, wa):\n"
            "    a, b = (x * 2).chunk(2, dim=-1)\n"
            "    return F.linear(a, wa), b * 3\n")
    p3, wl3 = make_problem(tmp_path, "halves", {"x": T([4, 8], "bfloat16"), "wa": T([2, 4], "bfloat16")},
                           {"ya": T([4, 2], "bfloat16"), "yb": T([4, 4], "bfloat16")}, ref3)
    c3, _ = solar(p3, wl3)
    assert c3.solar_graph.fused_elements() == 88


def test_whole_table_reshape_before_a_gather_counts_the_gathered_rows(tmp_path):
    # table [100, 1, 16] bf16 squeezed, converted whole to fp32, then 5 rows gathered (FlashInfer
    # 012's KV caches): the squeeze reads the model input, and its result reaches only the gather
    # (through the cast), so it counts the 5 x 16 gathered elements, not the 1600 converted; the
    # gather reads an intermediate (nothing); the 5 row sums are written: 80 + 5 = 85 elements
    ref = ("import torch\n"
           "def run(table, idx):\n"
           "    t = table.squeeze(1).to(torch.float32)\n"
           "    return t[idx].sum(-1)\n")
    p, wl = make_problem(tmp_path, "gather", {"table": T([100, 1, 16], "bfloat16"), "idx": T([5], "int64")},
                         {"s": T([5], "float32")}, ref)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 85
    assert b.bytes_model == 170
    # the cast first (L1/009's grad_output.to(float32)[token_indices]): the cast reads all of the
    # model input, 1600 + 5 = 1605 elements (the official L1/009 rows count the whole table: with
    # it, all 16 rows within 0.05%)
    ref2 = ("import torch\n"
            "def run(table, idx):\n"
            "    t = table.to(torch.float32)\n"
            "    return t[idx].sum(-1)\n")
    p2, wl2 = make_problem(tmp_path, "gather_cast", {"table": T([100, 16], "bfloat16"), "idx": T([5], "int64")},
                           {"s": T([5], "float32")}, ref2)
    c2, b2 = solar(p2, wl2)
    assert c2.solar_graph.fused_elements() == 1605
    assert b2.bytes_model == 3210


def test_sdpa_reads_q_and_k_never_v_and_counts_causal_in_full(tmp_path):
    # q, k, v: [1, 2, 16, 8] bf16 (256 elements each). Expanded upstream as QK^T (reads q, k: 512)
    # then PV (softmax is an intermediate, so v is not counted); output written: 256.
    # MACs: 1*2*16*16*(8 + 8) = 8192, causal counted in full.
    ref = ("import torch\nimport torch.nn.functional as F\n"
           "def run(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n")
    ins = {n: T([1, 2, 16, 8], "bfloat16") for n in ("q", "k", "v")}
    p, wl = make_problem(tmp_path, "sdpa", ins, {"o": T([1, 2, 16, 8], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 512 + 256
    assert b.solar_macs == 8192
    ref2 = ("import torch\nimport torch.nn.functional as F\n"
            "def run(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v * 1.0)\n")
    p2, wl2 = make_problem(tmp_path, "sdpa2", ins, {"o": T([1, 2, 16, 8], "bfloat16")}, ref2)
    c2, _ = solar(p2, wl2)
    # v * 1.0 reads v (256); the attention layer now has an intermediate operand: q, k not counted
    assert c2.solar_graph.fused_elements() == 256 + 256


def test_einsum_layers_carry_no_tensor_core_work(tmp_path):
    # torch.einsum is a layer upstream's old analyzer gives no MACs (official = memory term on
    # 016 and 043); refined counts its 2*64*32*16 FLOPs. Bytes: reads 2048 + 512, writes 1024.
    ref = "import torch\ndef run(a, b):\n    return torch.einsum('ij,jk->ik', a, b)\n"
    p, wl = make_problem(tmp_path, "einsum", {"a": T([64, 32], "bfloat16"), "b": T([32, 16], "bfloat16")},
                         {"c": T([64, 16], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert b.solar_macs == 0
    assert b.bytes_model == (2048 + 512 + 1024) * 2
    assert bound_from_counts(c, B200S, "refined").flops["tensor_bf16"] == 2 * 64 * 32 * 16


def test_fp8_literal_sets_rate_width_and_no_floor(tmp_path):
    # The source names torch.float8_e4m3fn: fp8 problem (1 B per element, fp8 rate, and no launch
    # floor: the official quantised rows have none). Layers: to(x) reads 64*128 = 8192; the second
    # cast and the matmul read intermediates (w not counted); output 64*32 = 2048 written.
    # MACs 64*128*32 = 262,144 at 3.62 PF; memory 10,240 B at 7.67 TB/s binds.
    ref = ("import torch\n"
           "def run(x, w):\n"
           "    return x.to(torch.float8_e4m3fn).to(torch.bfloat16) @ w\n")
    p, wl = make_problem(tmp_path, "fp8", {"x": T([64, 128], "bfloat16"), "w": T([128, 32], "bfloat16")},
                         {"y": T([64, 32], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.source_quant == {"fp8"}
    assert b.bytes_model == 8192 + 2048
    assert b.solar_macs == 64 * 128 * 32
    assert b.tensor_terms_ms["fp8"] == pytest.approx(2 * 262_144 / 3.62e15 * 1e3)
    assert b.overhead_ms == 0.0
    assert b.sol_ms == pytest.approx(10_240 / BW * 1e3)


def test_fp8_gemm_weights_are_read_at_two_bytes(tmp_path):
    # A fp8 problem prices its elements at 1 B, except the GEMM weights: model inputs that reach
    # a matmul only as its second operand are read at 2 B (16-bit module parameters in the
    # kernels upstream traced; Quant/021 M = 128: the 37.5 M-element weight at 2 B + the rest at
    # 1 B = 77.13 MB vs official 77.16 MB). x [64,128], w1 [32,128], w2 [16,32]: layers
    # x.to (reads 8192), w1.to (4096), w2.to (512) are the roots; the products read
    # intermediates; the output 64*16 = 1024 is written. Walk: 8192 + 4096 + 512 + 1024 = 13,824
    # elements at 1 B, plus one more byte for each weight element (4096 + 512; w1 counts for the
    # first product although it is an ancestor of the second one's activation): 18,432 B.
    ref = ("import torch\n"
           "def run(x, w1, w2):\n"
           "    q = lambda t: t.to(torch.float8_e4m3fn).to(torch.float32)\n"
           "    y = q(x) @ q(w1).T\n"
           "    return (y @ q(w2).T).to(torch.bfloat16)\n")
    ins = {"x": T([64, 128], "bfloat16"), "w1": T([32, 128], "bfloat16"), "w2": T([16, 32], "bfloat16")}
    p, wl = make_problem(tmp_path, "fp8w", ins, {"z": T([64, 16], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.source_quant == {"fp8"}
    assert c.solar_graph.fused_elements() == 13_824
    assert c.solar_graph.weight_root_elements() == 4096 + 512
    assert b.bytes_model == 13_824 + 4608
    assert b.sol_ms == pytest.approx(18_432 / BW * 1e3)
    # the same graph in a 16-bit problem: one width, 2 B for every element, weights included
    p16, wl16 = make_problem(tmp_path, "bf16w", ins, {"z": T([64, 16], "bfloat16")},
                             ref.replace("torch.float8_e4m3fn", "torch.bfloat16"))
    c16, b16 = solar(p16, wl16)
    assert c16.source_quant == set()
    assert b16.bytes_model == 13_824 * 2
    # the cache round-trip keeps the rule's result
    assert counts_from_json(counts_to_json(c)).solar().weight_root_elements == 4608


def test_fp8_inputs_without_a_literal_are_a_16_bit_problem(tmp_path):
    # precision comes from the source text only: an fp8 input alone does not make it fp8
    ref = "import torch\ndef run(x):\n    return x.to(torch.bfloat16) * 2\n"
    p, wl = make_problem(tmp_path, "fp8in", {"x": T([16], "float8_e4m3fn")}, {"y": T([16], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.source_quant == set()
    assert b.bytes_model == (16 + 16) * 2
    assert b.overhead_ms == pytest.approx(0.0004)


def test_layer_macs_conventions():
    # matmul: each index size from the first operand that has it, so a broadcast size-1 batch
    # dim of the first operand counts once: [1,2,4,8] @ [3,2,8,5] -> 1*2*4*8*5 (true work 960)
    assert _matmul_macs((1, 2, 4, 8), (3, 2, 8, 5)) == 320
    assert _matmul_macs((4, 8), (8, 5)) == 160
    assert _matmul_macs((8,), (8, 5)) == 40
    # _scaled_mm on packed fp4 ([M, K/2] x [K/2, N]) counts one MAC per stored byte: half the MACs
    a = torch.empty((128, 32), dtype=torch.float4_e2m1fn_x2, device="meta")
    b = torch.empty((32, 64), dtype=torch.float4_e2m1fn_x2, device="meta")
    out = torch.empty((128, 64), dtype=torch.bfloat16, device="meta")
    assert SolarGraphMode._macs("_scaled_mm", (a, b), {}, [out]) == 128 * 32 * 64
    # F.linear: every input element times the output features
    x = torch.empty((2, 3, 16), device="meta")
    w = torch.empty((8, 16), device="meta")
    assert SolarGraphMode._macs("linear", (x, w), {}, [torch.empty((2, 3, 8), device="meta")]) == 96 * 8


def test_real_runs_use_stand_ins_for_large_float_tensors(tmp_path):
    # a data-dependent reference (.item()) on a 64 MiB input runs on real CPU tensors; the input is
    # a stand-in (one value broadcast, all strides 0) and so is any large float result
    big = counting.stand_in((4096, 4096), torch.float32)
    assert counting._is_stand_in(big) and big.shape == (4096, 4096)
    out = counting._stand_in(torch.ops.aten.mul.Tensor, (big, big), {})
    assert counting._is_stand_in(out) and out.shape == (4096, 4096)
    # small results really run: their values can steer the reference
    assert counting._stand_in(torch.ops.aten.sum.default, (big,), {}) is None
    ref = ("import torch\n"
           "def run(x, n):\n"
           "    k = int(n.sum().item()) + 2\n"
           "    return x[:k].sum(0)\n")
    p, wl = make_problem(tmp_path, "dd", {"x": T([4096, 4096], "float32"), "n": T([4], "int64")},
                         {"y": T([4096], "float32")}, ref)
    c = count_workload(p, wl)
    assert c.real_tensors
    # n is zeros, so k = 2: x[:2] reads 8192 elements; n.sum() reads 4 and its 0-d result ends
    # in .item() (a dead end, 1); the column sums are written (4096)
    assert c.solar_graph.fused_elements() == 2 * 4096 + 4 + 1 + 4096


def test_torch_creators_are_traced_temporary_tensors(tmp_path):
    # torchview (upstream's tracer) wraps torch.zeros/ones/rand*/linspace/empty/...: their
    # result is a traced tensor of its own, so a layer reading it counts it like a model input.
    # x: [16, 8] bf16 (128), idx: [4] int64 (zeros: row 0 four times).
    # x[idx] reads what it selects (32) and idx (4); .float() * 2 is scattered by __setitem__,
    # which returns nothing and is no layer, so the product is a dead end (32 written).
    # out = torch.zeros(16, 8): out.to(bf16) reads out (128) and writes its result (128).
    # The same scatter into torch.empty: x[idx] (36) + dead-end .float() (32), and e.to() reads
    # e (128) and writes its result (128). 36 + 32 + 128 + 128 + 36 + 32 + 128 + 128 = 648.
    ref = ("import torch\n"
           "def run(x, idx):\n"
           "    out = torch.zeros(16, 8, dtype=torch.float32)\n"
           "    out[idx] = x[idx].float() * 2\n"
           "    e = torch.empty(16, 8, dtype=torch.float32)\n"
           "    e[idx] = x[idx].float()\n"
           "    return out.to(torch.bfloat16), e.to(torch.bfloat16)\n")
    p, wl = make_problem(tmp_path, "zeros_scatter", {"x": T([16, 8], "bfloat16"), "idx": T([4], "int64")},
                         {"o": T([16, 8], "bfloat16"), "e": T([16, 8], "bfloat16")}, ref)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 648
    assert b.bytes_model == 648 * 2
    # the rule is the tracer's, on every path: a mode seeing only the creator records no layer
    m = SolarGraphMode()
    with m:
        z = torch.ones(3, 5)
        y = z * 2
    assert [lay.name for lay in m.graph.layers] == ["mul"]
    assert m.graph.fused_elements() == 15 + 15
    del y
