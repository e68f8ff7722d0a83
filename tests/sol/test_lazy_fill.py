"""Real-tensor runs leave matmul-class outputs unfilled (lazy fill) until a value derived from
one is read: such a read voids the run and it is repeated with filled outputs, so the counts are
always those of the filled run (counting.ValuesObserved, count_workload's ``lazy_fill``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solbench.sol.batch import problem_counts
from solbench.sol.counting import FILLED_NOTE, ValuesObserved, _run_once, count_workload
from solbench.spec import load_problem

from sol_helpers import same_counts

#: reads input values (so it counts on real tensors), never the product's
READS_INPUT_ONLY = """import torch
def run(x, w):
    k = int((x[:, 0] > 0).sum().item())
    h = x[: max(k, 1)] @ w
    return torch.relu(h) * 2.0
"""

#: how much work follows depends on the product's values
READS_PRODUCT = """import torch
def run(x, w):
    n = int((x @ w > 0).sum().item())
    return (x @ w) + (torch.ones(n + 1) * 2.0).sum()
"""

READS_PRODUCT_TOLIST = """import torch
def run(x, w):
    k = int((x[:, 0] > 0).sum().item())
    v = (x @ w)[0, :4].tolist()
    return x * (1.0 + k + sum(v))
"""

MASKS_BY_PRODUCT = """import torch
def run(x, w):
    k = int((x[:, 0] > 0).sum().item())
    y = x @ w
    return y[y > 0] * float(k)
"""

#: unfilled products are dropped; later tensors of the same size (likely at the same storage
#: address) are computed from the inputs only, and their values are read
DROPS_PRODUCTS = """import torch
def run(x, w):
    for _ in range(8):
        t = (x @ w) * 3.0
        del t
    u = x * 1.0
    if u.sum().item() > 1e30:
        return u * 2.0
    return u
"""


#: indices computed from the product: with filled (random) values they fall out of range
INDEXES_BY_PRODUCT = """import torch
def run(x, w):
    k = int((x[:, 0] > 0).sum().item())
    idx = ((x @ w) * 1e6).long()
    return x.reshape(-1)[idx] * float(k)
"""


#: a SwiGLU over products that are never read (the MoE experts' shape of work)
SWIGLU = """import torch
def run(x, w):
    k = int((x[:, 0] > 0).sum().item())
    g = x[: max(k, 1)] @ w
    u = x[: max(k, 1)] @ w.t()
    return torch.nn.functional.silu(g) * u + 1.0
"""

#: how much work follows depends on a value computed pointwise from the product
READS_POINTWISE_OF_PRODUCT = """import torch
def run(x, w):
    s = torch.sigmoid(x @ w) * 2.0 - 1.0
    n = int((s > 0).sum().item())
    return s + (torch.ones(n + 1) * 2.0).sum()
"""


@pytest.fixture(autouse=True)
def _every_product_lazy(monkeypatch):
    """These references' products are small (32 x 32): leave every one unfilled."""
    import solbench.sol.counting as counting

    monkeypatch.setattr(counting, "LAZY_FILL_MIN_ELEMS", 1)


def _problem(tmp_path: Path, reference: str, n: int = 32, name: str = "p"):
    d = tmp_path / name
    d.mkdir()
    defn = {"name": name, "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N", "N"], "dtype": "float32"},
                       "w": {"shape": ["N", "N"], "dtype": "float32"}},
            "outputs": {"y": {"shape": ["N", "N"], "dtype": "float32"}}, "reference": reference}
    (d / "definition.json").write_text(json.dumps(defn))
    (d / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"w{i}", "axes": {"N": n + 8 * i},
                    "inputs": {"x": {"type": "random"}, "w": {"type": "random"}}}) + "\n" for i in range(2)))
    return load_problem(d)


def test_a_reference_that_never_reads_its_products_counts_lazily_as_filled(tmp_path):
    p = _problem(tmp_path, READS_INPUT_ONLY)
    w = p.workloads[0]
    lazy = _run_once(p, w, real=True, lazy_fill=True)  # no ValuesObserved
    filled = _run_once(p, w, real=True, lazy_fill=False)
    same_counts(lazy, filled)
    # hand-worked: one k x 32 x 32 product, 2 FLOP per MAC, k = rows of x with x[:, 0] > 0
    assert lazy.mma_flops["fp32"] > 0 and lazy.mma_flops["fp32"] % (2 * 32 * 32) == 0
    c = count_workload(p, w)
    assert c.mode == "real" and not any(n.startswith(FILLED_NOTE) for n in c.notes)


def _repeated_filled(p):
    """The lazy run of p's first workload is void; the count is the filled run's, noted."""
    w = p.workloads[0]
    with pytest.raises(ValuesObserved):
        _run_once(p, w, real=True, lazy_fill=True)
    filled = _run_once(p, w, real=True, lazy_fill=False)
    c = count_workload(p, w)
    same_counts(c, filled)
    assert any(n.startswith(FILLED_NOTE) for n in c.notes)
    return filled


def test_a_read_of_a_products_values_repeats_the_run_filled(tmp_path):
    filled = _repeated_filled(_problem(tmp_path, READS_PRODUCT))
    # the work after the read depends on the filled values: n + 1 elements multiplied by 2,
    # with n the positive entries of the filled 32 x 32 product (a zero fill would give n = 0)
    ones_mul = filled.cuda_flops["fp32"] - 32 * 32 - 32 * 32  # minus the compare and the add
    assert ones_mul > 1


@pytest.mark.parametrize("ref", [READS_PRODUCT_TOLIST, MASKS_BY_PRODUCT], ids=["tolist", "boolean-mask"])
def test_value_reads_outside_item_are_seen(tmp_path, ref):
    p = _problem(tmp_path, ref)
    w = p.workloads[0]
    with pytest.raises(ValuesObserved):
        _run_once(p, w, real=True, lazy_fill=True)
    same_counts(count_workload(p, w), _run_once(p, w, real=True, lazy_fill=False))


def test_a_reused_storage_address_is_not_taken_for_an_unfilled_value(tmp_path):
    p = _problem(tmp_path, DROPS_PRODUCTS)
    w = p.workloads[0]
    lazy = _run_once(p, w, real=True, lazy_fill=True)  # u is computed from x alone: no ValuesObserved
    same_counts(lazy, _run_once(p, w, real=True, lazy_fill=False))


def test_problem_counts_fills_at_once_after_a_read(tmp_path):
    p = _problem(tmp_path, READS_PRODUCT)
    together = problem_counts(p)
    assert any(n.startswith(FILLED_NOTE) for n in together[0].notes)
    assert not any(n.startswith(FILLED_NOTE) for n in together[1].notes)  # filled from the start
    for c, w in zip(together, p.workloads):
        same_counts(c, _run_once(p, w, real=True, lazy_fill=False))


def test_an_index_derived_from_a_product_is_a_read(tmp_path):
    """Whether an index is in range decides whether the op raises: a zero fill would give
    valid indices (and a count) where the filled run fails."""
    from solbench.sol.counting import CountingError

    p = _problem(tmp_path, INDEXES_BY_PRODUCT)
    w = p.workloads[0]
    with pytest.raises(ValuesObserved):
        _run_once(p, w, real=True, lazy_fill=True)
    with pytest.raises((IndexError, RuntimeError)):
        _run_once(p, w, real=True, lazy_fill=False)
    with pytest.raises(CountingError):
        count_workload(p, w)


def test_small_products_are_filled_at_once(tmp_path, monkeypatch):
    """Below LAZY_FILL_MIN_ELEMS a product is filled (cheaper than tainting every later op);
    fill k is seeded k, so its values do not depend on which earlier products were skipped."""
    import solbench.sol.counting as counting

    monkeypatch.setattr(counting, "LAZY_FILL_MIN_ELEMS", 1 << 16)
    p = _problem(tmp_path, READS_PRODUCT)  # reads its 32 x 32 product: filled, so no rerun
    w = p.workloads[0]
    lazy = _run_once(p, w, real=True, lazy_fill=True)  # no ValuesObserved
    same_counts(lazy, _run_once(p, w, real=True, lazy_fill=False))


def _ran(monkeypatch):
    """The names of the ops the counting mode really ran (not skipped, not short-circuited)."""
    import solbench.sol.counting as counting

    ran = []
    real = counting._CountingMode._run_op

    def spy(self, func, args, kwargs, tainted_in):
        ran.append(counting._packet(func))
        return real(self, func, args, kwargs, tainted_in)

    monkeypatch.setattr(counting._CountingMode, "_run_op", spy)
    return ran


def test_pointwise_work_on_an_unfilled_product_is_not_run_and_counts_as_filled(tmp_path, monkeypatch):
    p = _problem(tmp_path, SWIGLU)
    w = p.workloads[0]
    ran = _ran(monkeypatch)
    lazy = _run_once(p, w, real=True, lazy_fill=True)  # no ValuesObserved: nothing reads g or u
    lazy_ran = list(ran)
    ran.clear()
    filled = _run_once(p, w, real=True, lazy_fill=False)
    same_counts(lazy, filled)
    assert {"silu", "mul", "add"} <= set(ran)  # the filled run computes the SwiGLU
    assert not {"silu", "mul", "add"} & set(lazy_ran)  # the lazy run leaves it uncomputed
    # hand-worked: k rows, two k x 32 x 32 products at 2 FLOP per MAC
    k = lazy.mma_flops["fp32"] / (2 * 2 * 32 * 32)
    assert k == int(k) and 1 <= k <= 32


def test_a_read_of_a_value_computed_pointwise_from_a_product_repeats_the_run_filled(tmp_path):
    _repeated_filled(_problem(tmp_path, READS_POINTWISE_OF_PRODUCT))


def test_apply_reads_values_below_the_dispatcher(tmp_path):
    """Tensor.apply_ calls a Python function on every element's value without an aten op:
    on a tensor derived from an unfilled product it is a read (the lazy run is void)."""
    ref = """import torch
def run(x, w):
    y = (x @ w)[:4, :4].clone()
    seen = []
    y.apply_(lambda v: seen.append(v > 0) or v)
    return x * float(sum(seen))
"""
    p = _problem(tmp_path, ref)
    w = p.workloads[0]
    with pytest.raises(ValuesObserved):
        _run_once(p, w, real=True, lazy_fill=True)
    # (on the meta device apply_ runs no callback at all: the real-tensor path is the one here)
    c = count_workload(p, w, meta=False, fake_failed="not tried")
    assert any(n.startswith(FILLED_NOTE) for n in c.notes)
    same_counts(c, _run_once(p, w, real=True, lazy_fill=False))
