"""Views of stand-in inputs keep the geometry a real input's views have (counting's meta twins).

A stand-in is one value broadcast (all strides 0), so every view of it has offset 0 and strides
0: the two halves of a chunk, two rows of a cache or two experts of a weight were one view of
one element, and a real-tensor count (the count of references that read values) undercounted
their reads and writes. Each case is counted on real tensors with a small STAND_IN_BYTES (so
the inputs are stand-ins) and checked against a hand count and against the same reference
counted on shapes alone (the meta device, no stand-ins), which ``bench/sol_mode_agreement.py``
does for every dev problem."""

from __future__ import annotations

import json

import pytest
import torch

import solbench.sol.counting as counting
from solbench.sol.counting import count_workload
from solbench.spec import load_problem

#: makes the reference read a value, so it counts on real tensors
READ = "    _ = int((pos[0] >= 0).item())\n"


@pytest.fixture(autouse=True)
def _small_stand_ins(monkeypatch):
    monkeypatch.setattr(counting, "STAND_IN_BYTES", 8 << 10)


def _problem(tmp_path, name, body, inputs, axes, out_shape, dtype="float32"):
    d = tmp_path / name
    d.mkdir()
    decl = {k: {"shape": shape, "dtype": dt} for k, (shape, dt) in inputs.items()}
    decl["pos"] = {"shape": ["B"], "dtype": "int64"}
    defn = {"name": name, "axes": {k: {"type": "var"} for k in axes}, "inputs": decl,
            "outputs": {"out": {"shape": out_shape, "dtype": dtype}},
            "reference": "import torch\nimport torch.nn.functional as F\n"
                         f"def run({', '.join(decl)}):\n" + body}
    (d / "definition.json").write_text(json.dumps(defn))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": axes, "inputs": {
        k: {"type": "random"} for k in decl}}) + "\n")
    return load_problem(d)


def _both(tmp_path, body, inputs, axes, out_shape):
    """(real-tensor count of the reference that reads a value, meta count of the one that does not)."""
    real_p = _problem(tmp_path, "real", READ + body, inputs, axes, out_shape)
    meta_p = _problem(tmp_path, "meta", body, inputs, axes, out_shape)
    real = count_workload(real_p, real_p.workloads[0])
    meta = count_workload(meta_p, meta_p.workloads[0])
    assert real.real_tensors and not meta.real_tensors
    return real, meta


def _reads(c):
    return {name: r for name, _, _, _, r in c.inputs}


def test_both_halves_of_a_chunked_stand_in_are_read(tmp_path):
    """GEGLU (L1/085): x.chunk(2, -1) of an N x 2D input; gelu(first) * second reads all of x.
    It counted one half (the halves were one view), so T_SOL came out 33% low."""
    body = "    g, l = x.chunk(2, dim=-1)\n    return F.gelu(g, approximate='tanh') * l\n"
    real, meta = _both(tmp_path, body, {"x": (["B", "D"], "float32")}, {"B": 64, "D": 128}, ["B", "D"])
    assert _reads(real)["x"] == 64 * 128 * 4 == _reads(meta)["x"]
    # x read once, the B x D/2 output written once (pos: the real run's value read only)
    assert real.bytes_fused - _reads(real)["pos"] == meta.bytes_fused == 64 * 128 * 4 + 64 * 64 * 4


def test_an_in_place_row_update_of_a_stand_in_cache_writes_the_rows(tmp_path):
    """A KV-cache update (L1/018's shape): cache[:, p] = k; return cache. Only the B x D
    updated elements must be written; a stand-in cache's region counted one element."""
    body = "    cache[:, 3] = k\n    return cache\n"
    real, meta = _both(tmp_path, body, {"cache": (["B", "S", "D"], "float32"), "k": (["B", "D"], "float32")},
                       {"B": 4, "S": 256, "D": 64}, ["B", "S", "D"])
    assert [w for _, _, _, w, _ in real.output_writes] == [4 * 64] == [w for _, _, _, w, _ in meta.output_writes]
    assert real.bytes_outputs_certain == meta.bytes_outputs_certain == 4 * 64 * 4


def test_every_expert_of_a_stand_in_weight_is_read(tmp_path):
    """An MoE loop (L2/047's shape) selects one expert's matrix at a time: every selected
    expert is read once (E x F x D elements); it counted one expert."""
    body = ("    y = torch.zeros(x.shape[0], w.shape[1])\n"
            "    for e in range(w.shape[0]):\n"
            "        y = y + x @ w[e].t()\n"
            "    return y\n")
    real, meta = _both(tmp_path, body, {"x": (["B", "D"], "float32"), "w": (["E", "F", "D"], "float32")},
                       {"B": 8, "D": 64, "E": 4, "F": 32}, ["B", "F"])
    assert _reads(real)["w"] == 4 * 32 * 64 * 4 == _reads(meta)["w"]


def test_a_kernel_that_refuses_a_stand_in_s_layout_counts_on_its_shapes(tmp_path):
    """group_norm's CPU kernel wants a contiguous input and a stand-in has all strides 0 (L2/023
    failed to count on real tensors): the op's results are taken from the meta kernel."""
    body = "    return F.silu(F.group_norm(x, 4))\n"
    real, meta = _both(tmp_path, body, {"x": (["B", "C", "D"], "float32")}, {"B": 2, "C": 8, "D": 256},
                       ["B", "C", "D"])
    assert _reads(real)["x"] == 2 * 8 * 256 * 4 == _reads(meta)["x"]
    assert real.bytes_fused - _reads(real)["pos"] == meta.bytes_fused
    # the same FLOPs but the real run's one comparison of pos[0]
    assert real.cuda_flops["fp32"] - 1 == meta.cuda_flops["fp32"] > 0


def test_a_shape_error_on_a_stand_in_is_still_the_references_error(tmp_path):
    """The layout fallback takes an op's results from its meta kernel only when that accepts
    the shapes: a reference whose shapes are wrong fails to count as before."""
    p = _problem(tmp_path, "bad", READ + "    return F.group_norm(x, 3)\n", {"x": (["B", "C", "D"], "float32")},
                 {"B": 2, "C": 8, "D": 256}, ["B", "C", "D"])
    with pytest.raises(counting.CountingError):
        count_workload(p, p.workloads[0])


# -- a second red team (2026-12-05): layouts the stand-in's zero strides hid ----------------

def _agree(tmp_path, body, inputs, axes, out_shape):
    real, meta = _both(tmp_path, body, inputs, axes, out_shape)
    rr, mr = _reads(real), _reads(meta)
    rr.pop("pos"), mr.pop("pos")
    assert rr == mr
    assert [x[:4] for x in real.output_writes] == [x[:4] for x in meta.output_writes]
    return real, meta


def test_in_place_view_ops_reshape_the_stand_in_and_its_twin(tmp_path):
    """unsqueeze_ / t_ change an input's shape and strides: they were skipped as writes into a
    stand-in (a shape mismatch, or x + y broadcast to B x B x D: 22x the FLOPs and writes)."""
    real, meta = _agree(tmp_path, "    x.unsqueeze_(1)\n    return x + y\n",
                        {"x": (["B", "D"], "float32"), "y": (["B", "S", "D"], "float32")},
                        {"B": 64, "S": 8, "D": 64}, ["B", "S", "D"])
    assert real.cuda_flops["fp32"] - 1 == meta.cuda_flops["fp32"] == 64 * 8 * 64  # one add each


def test_a_transposed_square_input_reads_its_column_and_its_row(tmp_path):
    """x.t_() on a square input: x[:, 0] after it is row 0 before it, as y[0] is (the twin
    follows the in-place transpose; a stale twin counted two views)."""
    real, meta = _agree(tmp_path, "    y = x.view(64, 64)\n    x.t_()\n    return x[:, 0] + y[0]\n",
                        {"x": (["N", "N"], "float32")}, {"N": 64, "B": 1}, ["N"])
    assert _reads(meta)["x"] == 64 * 4  # one row, read by both views


def test_contiguous_of_a_contiguous_view_copies_nothing(tmp_path):
    """x[:K].contiguous() is x[:K] itself on a real tensor (no copy: it is an input view) and
    was a clone of the stand-in's view (a read and a fresh write of K x D)."""
    real, meta = _agree(tmp_path, "    return x[:16].contiguous()\n", {"x": (["B", "D"], "float32")},
                        {"B": 64, "D": 128}, ["B", "D"])
    # the output is a view of input x, unchanged: nothing must be read or written
    assert _reads(meta)["x"] == 0 and [w for _, _, _, w, _ in meta.output_writes] == [0]


def test_a_repeat_kv_of_a_cache_slice_reads_the_slice_once(tmp_path):
    """GQA decode: repeat_kv (expand + reshape) of kc[:, :, :L]. The reshape copies on a real
    tensor; on the stand-in it was a view, and each of the H / HKV repeats counted as a read of
    the cache (3.8x the bytes)."""
    body = ("    k = kc[:, :, :16]\n"
            "    k = k[:, :, None].expand(2, 2, 4, 16, 64).reshape(2, 8, 16, 64)\n"
            "    return (q @ k.transpose(-1, -2)).softmax(-1)\n")
    real, meta = _agree(tmp_path, body, {"q": (["B", "H", "Q", "D"], "float32"),
                                         "kc": (["B", "HKV", "S", "D"], "float32")},
                        {"B": 2, "H": 8, "HKV": 2, "Q": 1, "S": 256, "D": 64}, ["B", "H", "Q", "Q"])
    assert _reads(real)["kc"] == 2 * 2 * 16 * 64 * 4  # the 16-position slice of both KV heads


def test_a_reshape_that_copies_on_a_real_tensor_copies_on_the_stand_in(tmp_path):
    """A flatten of a transpose is a view of the stand-in (its strides are all 0) and a copy
    of a real tensor (the shape-only run dispatches a clone): counted as that copy, a copy of
    the whole input, as the shape-only run counts it. Half of it is then read: the chunks."""
    body = "    y = x.transpose(0, 1).reshape(-1)\n    a, b = y.chunk(4)[:2]\n    return a + b\n"
    real, meta = _agree(tmp_path, body, {"x": (["B", "D"], "float32")}, {"B": 64, "D": 128}, ["B"])
    assert _reads(meta)["x"] == 2 * 2048 * 4  # the two chunks read, 2,048 elements each


def test_a_copy_keeps_its_source_s_layout(tmp_path):
    """y = x.t().clone() is laid out as x.t() (clone keeps a dense source's strides), so
    y[0] is column 0 of x and x[0] is row 0: two views, both read (the stand-in copy's twin
    was contiguous, and y[0] passed for x[0])."""
    real, meta = _agree(tmp_path, "    y = x.t().clone()\n    return x[0] + y[0]\n",
                        {"x": (["N", "N"], "float32")}, {"N": 64, "B": 1}, ["N"])
    assert _reads(meta)["x"] == 2 * 64 * 4


def test_a_stand_in_with_a_trailing_dim_of_one_is_a_stand_in(tmp_path):
    """A [B, 1] stand-in keeps stride 1 on its size-1 dim: it was taken for one element."""
    real, meta = _agree(tmp_path, "    return s * 2.0\n", {"s": (["B", "ONE"], "float32")},
                        {"B": 4096, "ONE": 1}, ["B", "ONE"])
    assert _reads(real)["s"] == 4096 * 4


def test_the_chunks_of_a_large_product_are_three_outputs(tmp_path):
    """q, k, v = (x @ w).chunk(3): three views of one stand-in product, offset 0 each, were
    counted as one output."""
    real, meta = _agree(tmp_path, "    q, k, v = (x @ w).chunk(3, dim=-1)\n    return q, k, v\n",
                        {"x": (["B", "D"], "float32"), "w": (["D", "F"], "float32")},
                        {"B": 64, "D": 64, "F": 192}, ["B", "D"])
    assert [n for n, _, _ in real.outputs] == [64 * 64] * 3


def test_a_view_the_stand_in_cannot_take_still_reads_the_input(tmp_path):
    """RoPE with view_as_complex: the CPU kernel refuses the stand-in (strides 0), the meta
    kernel's result stands in, and reads through it are reads of x (they were lost)."""
    body = ("    xc = torch.view_as_complex(x.reshape(16, 8, 32, 2))\n"
            "    fc = torch.view_as_complex(f.reshape(8, 32, 2))\n"
            "    return torch.view_as_real(xc * fc).flatten(2)\n")
    real, meta = _agree(tmp_path, body, {"x": (["B", "H", "D"], "float32"), "f": (["H", "D"], "float32")},
                        {"B": 16, "H": 8, "D": 64}, ["B", "H", "D"])
    assert _reads(real)["x"] == 16 * 8 * 64 * 4 and _reads(real)["f"] == 8 * 64 * 4


# -- its re-check (2026-12-05) --------------------------------------------------------------

def test_a_copy_takes_the_layout_its_op_gives(tmp_path):
    """The twin of a stand-in copy is the copying op's meta result: .contiguous() of a
    transpose is row-major (a later .contiguous() of its rows copies nothing), a channels_last
    copy is channels_last (a later .contiguous() of its leading slice copies), and a
    same-dtype .to(copy=True) of a transpose keeps the transpose's strides."""
    cases = [("    y = x.t().contiguous()\n    return y[:16].contiguous()\n", {"x": (["N", "N"], "float32")},
              {"N": 64, "B": 1}, ["N", "N"]),
             ("    y = x.contiguous(memory_format=torch.channels_last)\n    return y[:4].contiguous()\n",
              {"x": (["B", "C", "H", "W"], "float32")}, {"B": 8, "C": 16, "H": 8, "W": 8}, ["B", "C", "H", "W"]),
             ("    y = x.t().to(torch.float32, copy=True)\n    return y[:16].contiguous()\n",
              {"x": (["N", "N"], "float32")}, {"N": 64, "B": 1}, ["N", "N"])]
    for i, (body, inputs, axes, out) in enumerate(cases):
        (tmp_path / str(i)).mkdir()
        _agree(tmp_path / str(i), body, inputs, axes, out)


def test_a_reshape_copy_has_a_storage_of_its_own(tmp_path):
    """The copy a stand-in's reshape stands for is a fresh tensor: writes into it are not
    writes into x, nor x's into it (they shared x's storage and its count of changed elements:
    1.5-2x the writes)."""
    for i, body in enumerate(["    y = x.t().reshape(-1)\n    y.zero_()\n    return y, x\n",
                              "    y = x.t().reshape(-1)\n    x.mul_(2.0)\n    return y, x\n"]):
        (tmp_path / str(i)).mkdir()
        real, meta = _agree(tmp_path / str(i), body, {"x": (["N", "N"], "float32")}, {"N": 64, "B": 1}, ["N", "N"])
        assert real.bytes_outputs_certain == meta.bytes_outputs_certain == 64 * 64 * 4  # one of the two


def test_one_output_returned_twice_is_one_output(tmp_path):
    """h and h.view(...) of a stand-in result are one output (the same elements), as on shapes."""
    real, meta = _agree(tmp_path, "    h = x * 2.0\n    return h, h.view(64, 128)\n",
                        {"x": (["B", "D"], "float32")}, {"B": 64, "D": 128}, ["B", "D"])
    assert [n for n, _, _ in real.outputs] == [64 * 128]


def test_an_out_of_place_masked_fill_of_a_stand_in_is_a_new_tensor(tmp_path):
    """x.masked_fill(mask, v) with a constant false mask: a new tensor equal to x, a copy of x
    with the mask's extent replaced (as on shapes); it was x itself, written 0 times."""
    real, meta = _agree(tmp_path, "    return x.masked_fill(x > 100.0, 0.0)\n",
                        {"x": (["B", "D"], "float32")}, {"B": 64, "D": 128}, ["B", "D"])
    assert [w for _, _, _, w, _ in real.output_writes] == [64 * 128]
