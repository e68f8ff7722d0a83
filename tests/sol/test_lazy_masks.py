"""Real-tensor runs leave large masks and masked writes uncomputed (``lazy_masks``,
counting._skip_unread) until a value derived from one is read: the read voids the run, which is
repeated computing them, so the counts are always those of the run that computes everything.
The references here quantise the way the nvfp4 problems do (masked assignments of codes into a
uint8 tensor, whose packed codes feed only a product)."""

from __future__ import annotations

import json
import weakref
from pathlib import Path

import pytest
import torch

from solbench.sol import counting
from solbench.sol.batch import problem_counts
from solbench.sol.counting import (FILLED_NOTE, MASKS_NOTE, TAINT_FILL, TAINT_MASK, ValuesObserved,
                                   _add_taint, _op_info, _run_once, _skey, _skip_unread, _taint_of,
                                   count_workload)
from solbench.spec import load_problem

from sol_helpers import same_counts

N = 256  # x is N x N = 65,536 elements: LAZY_FILL_MIN_ELEMS, the smallest skipped size

#: codes by masked assignments (as the nvfp4 quantisers), packed, into a product; a read of
#: the input's values (so it counts on real tensors), never of a mask
QUANTISES = """import torch
def quant(x):
    r = torch.zeros_like(x, dtype=torch.uint8)
    r[(x >= 0.0) & (x <= 0.5)] = 1
    r[(x > 0.5) & (x < 1.5)] = 2
    r[x >= 1.5] = 3
    r[x < 0.0] = 8
    return r[..., ::2] + r[..., 1::2] * 16
def run(x, w):
    k = int((x[:, 0] > 0).sum().item())
    q = quant(x).float()
    return (q @ w[: q.shape[1]]) * float(k)
"""

#: how much work follows depends on how many elements a mask selects
READS_MASK = """import torch
def run(x, w):
    n = int((x > 0.5).sum().item())
    return (x @ w) + torch.ones(n % 7 + 1).sum()
"""

#: a tensor built from Python data holding a mask's count: read below the dispatcher
READS_MASK_THROUGH_TENSOR = """import torch
def run(x, w):
    k = int((x[:, 0] > 0).sum().item())
    m = x > 0.5
    t = torch.tensor([m.sum(), m[0].sum()])
    return (x @ w) * float(k) + t.float().sum()
"""

#: custom inputs: the generator quantises a weight; the reference reads nothing of it, or
#: reads the packed codes
GEN = """import torch
def get_inputs(axes_and_scalars, device):
    n = axes_and_scalars["N"]
    x = torch.randn(n, n, device=device)
    w = torch.randn(n, n, device=device)
    r = torch.zeros_like(w, dtype=torch.uint8)
    r[w >= 0.0] = 1
    r[w < 0.0] = 2
    return {"x": x, "wq": r}
"""
GEN_UNREAD = GEN + """
def run(x, wq):
    k = int((x[:, 0] > 0).sum().item())
    return (x @ wq.float()) * float(k)
"""
GEN_READ = GEN + """
def run(x, wq):
    k = int(wq.sum().item())
    return (x @ wq.float()) * float(k % 5)
"""


def _problem(tmp_path: Path, reference: str, custom: bool = False, name: str = "p"):
    d = tmp_path / name
    d.mkdir()
    second = "wq" if custom else "w"
    defn = {"name": name, "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N", "N"], "dtype": "float32"},
                       second: {"shape": ["N", "N"], "dtype": "uint8" if custom else "float32"}},
            "outputs": {"y": {"shape": ["N", "N"], "dtype": "float32"}}, "reference": reference}
    if custom:
        defn["custom_inputs_entrypoint"] = "get_inputs"
    (d / "definition.json").write_text(json.dumps(defn))
    kind = "custom" if custom else "random"
    (d / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"w{i}", "axes": {"N": N + 16 * i},
                    "inputs": {"x": {"type": kind}, second: {"type": kind}}}) + "\n" for i in range(2)))
    return load_problem(d)


def _computed(p, w):
    return _run_once(p, w, real=True, lazy_fill=False, lazy_masks=False)


def test_a_comparison_over_65536_contiguous_floats_is_left_as_zeros_of_its_shape():
    x = torch.randn(N, N)
    ge = torch.ops.aten.ge.Scalar
    out = _skip_unread(ge, _op_info(ge), (x, 0.25), {}, [x])
    assert out.dtype == torch.bool and out.shape == (N, N) and out.is_contiguous() and not out.any()
    band = torch.ops.aten.bitwise_and.Tensor
    m = x > 0
    assert _skip_unread(band, _op_info(band), (m, m), {}, [m, m]).shape == (N, N)
    small = torch.randn(255, 256)  # 65,280 elements: computed
    assert _skip_unread(ge, _op_info(ge), (small, 0.25), {}, [small]) is None
    ints = torch.zeros(N, N, dtype=torch.int64)  # an integer operand: never skipped
    assert _skip_unread(ge, _op_info(ge), (ints, 1), {}, [ints]) is None
    xt = x.t()  # not contiguous: computed
    assert _skip_unread(ge, _op_info(ge), (xt, 0.25), {}, [xt]) is None
    add = torch.ops.aten.add.Tensor  # a float result: computed (its values feed scales)
    assert _skip_unread(add, _op_info(add), (x, x), {}, [x, x]) is None
    assert not _op_info(torch.ops.aten.bernoulli.p).skippable  # draws random numbers
    assert not _op_info(torch.ops.aten.ge_.Scalar).skippable  # in place


def test_a_masked_write_of_one_value_of_the_destination_dtype_writes_nothing():
    dst = torch.zeros(N, N, dtype=torch.uint8)
    m = torch.ones(N, N, dtype=torch.bool)
    val = torch.tensor(7, dtype=torch.uint8)
    op = torch.ops.aten.index_put_.default
    info = _op_info(op)
    assert info.skippable
    out = _skip_unread(op, info, (dst, [m], val), {}, [dst, m, val])
    assert out is dst and int(dst.sum()) == 0
    assert _skip_unread(op, info, (dst, [m], val, True), {}, [dst, m, val]) is None  # accumulates
    wide = torch.tensor(7, dtype=torch.int64)  # the real op raises on the dtypes
    assert _skip_unread(op, info, (dst, [m], wide), {}, [dst, m, wide]) is None
    rows = torch.ones(N, dtype=torch.bool)  # not dst's shape
    assert _skip_unread(op, info, (dst, [rows], val), {}, [dst, rows, val]) is None
    two = torch.tensor([7, 7], dtype=torch.uint8)  # two values
    assert _skip_unread(op, info, (dst, [m], two), {}, [dst, m, two]) is None


def test_a_freed_storage_s_taint_dies_with_it():
    """The entry of a freed storage is dead even when a new storage gets its address (key)."""
    taint: dict = {}
    t = torch.zeros(8)
    _add_taint(taint, t, TAINT_MASK)
    assert _taint_of(taint, t) == TAINT_MASK
    _add_taint(taint, t, TAINT_FILL)
    assert _taint_of(taint, t[2:]) == TAINT_MASK | TAINT_FILL  # a view: same storage
    key = _skey(t)
    del t
    u = torch.ones(8)
    taint[_skey(u)] = taint[key]  # as if u's storage had reused the freed address
    assert _taint_of(taint, u) == 0


def test_a_quantiser_whose_codes_feed_only_a_product_counts_lazily_as_computed(tmp_path):
    p = _problem(tmp_path, QUANTISES)
    w = p.workloads[0]
    lazy = _run_once(p, w, real=True, lazy_fill=False, lazy_masks=True)  # no ValuesObserved
    same_counts(lazy, _computed(p, w))
    c = count_workload(p, w)
    assert c.mode == "real" and not any(n.startswith((MASKS_NOTE, FILLED_NOTE)) for n in c.notes)
    # five masked writes (zeros_like, then four index_put_), each counted: skipping is not dropping
    assert lazy.op_counts["index_put"] == 4 and lazy.op_counts["ge"] == 2


def test_skipped_ops_are_counted_as_computed_ops_are():
    """Every skipped op is still dispatched to the counting mode and counted; only its
    kernel is not run (the hand count of QUANTISES: 4 writes, 2 ge, 1 le, 1 gt, 2 lt, 2 and)."""
    x = torch.randn(N, N)
    c = counting.Counts(real_tensors=True, mode="real")
    mode = counting._CountingMode(c, short_circuit=True, lazy_masks=True)
    with mode:
        r = torch.zeros_like(x, dtype=torch.uint8)
        r[(x >= 0.0) & (x <= 0.5)] = 1
    assert c.op_counts["ge"] == 1 and c.op_counts["le"] == 1 and c.op_counts["bitwise_and"] == 1
    assert c.op_counts["index_put"] == 1
    assert int(r.sum()) == 0  # not written
    assert _taint_of(mode.taint, r) == TAINT_MASK


def test_a_read_of_a_mask_voids_the_lazy_run_and_only_masks_are_computed_again(tmp_path):
    p = _problem(tmp_path, READS_MASK)
    w = p.workloads[0]
    with pytest.raises(ValuesObserved) as e:
        _run_once(p, w, real=True, lazy_fill=False, lazy_masks=True)
    assert e.value.kinds == TAINT_MASK
    c = count_workload(p, w)
    same_counts(c, _computed(p, w))
    assert any(n.startswith(MASKS_NOTE) for n in c.notes)
    assert not any(n.startswith(FILLED_NOTE) for n in c.notes)  # the product was not read
    together = problem_counts(p)
    assert any(n.startswith(MASKS_NOTE) for n in together[0].notes)
    assert not any(n.startswith(MASKS_NOTE) for n in together[1].notes)  # computed from the start
    for c, w in zip(together, p.workloads):
        same_counts(c, _computed(p, w))


def test_a_tensor_built_from_a_mask_s_count_is_a_read(tmp_path):
    p = _problem(tmp_path, READS_MASK_THROUGH_TENSOR)
    w = p.workloads[0]
    with pytest.raises(ValuesObserved):
        _run_once(p, w, real=True, lazy_fill=False, lazy_masks=True)
    same_counts(count_workload(p, w), _computed(p, w))


def test_masks_skipped_while_generating_inputs_stay_tainted_in_the_count(tmp_path):
    p = _problem(tmp_path, GEN_UNREAD, custom=True, name="unread")
    w = p.workloads[0]
    lazy = _run_once(p, w, real=True, lazy_fill=False, lazy_masks=True)  # nothing read
    same_counts(lazy, _computed(p, w))
    p = _problem(tmp_path, GEN_READ, custom=True, name="read")
    w = p.workloads[0]
    with pytest.raises(ValuesObserved) as e:  # wq's codes were never written: read in the count
        _run_once(p, w, real=True, lazy_fill=False, lazy_masks=True)
    assert e.value.kinds == TAINT_MASK
    c = count_workload(p, w)
    same_counts(c, _computed(p, w))
    assert any(n.startswith(MASKS_NOTE) for n in c.notes)


def test_generation_reads_of_skipped_values_through_tolist_are_caught():
    gen = counting._ShortCircuitMode(lazy_masks=True)
    x = torch.randn(N, N)
    with gen.guard(), gen:
        m = x > 0.5
        with pytest.raises(ValuesObserved):
            m.tolist()
    assert _taint_of(gen.taint, m) == TAINT_MASK
    del m
    assert weakref is not None
