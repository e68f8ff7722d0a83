"""Real-tensor counting: stand-ins (one value broadcast) propagate exactly through pointwise
ops and constant-mask writes."""

from __future__ import annotations

import torch

from solbench.sol.counting import _constant_mask_write, _constant_pointwise, _is_stand_in

aten = torch.ops.aten


def _si(value, shape, dtype=torch.float32):
    return torch.tensor(value, dtype=dtype).expand(shape)


def test_pointwise_on_stand_ins_is_exact_and_stays_a_stand_in():
    x = _si(2.5, (1000, 1000))
    m = _constant_pointwise(aten.gt.Scalar, (x, 1.0), {})
    assert _is_stand_in(m) and m.dtype == torch.bool and m.shape == x.shape and bool(m[3, 7])
    both = _constant_pointwise(aten.bitwise_and.Tensor, (m, _constant_pointwise(aten.lt.Scalar, (x, 2.0), {})), {})
    assert _is_stand_in(both) and not bool(both[0, 0])          # 2.5 > 1 and 2.5 < 2 is False
    y = _constant_pointwise(aten.mul.Tensor, (x, torch.tensor(4.0)), {})
    assert _is_stand_in(y) and float(y[999, 999]) == 10.0
    # type promotion as the real op's: a 0-dim fp32 factor does not widen a bf16 tensor
    b = _si(1.3, (64, 64), torch.bfloat16)
    s = torch.tensor(0.7)
    z = _constant_pointwise(aten.mul.Tensor, (b, s), {})
    assert _is_stand_in(z) and z.dtype == torch.bfloat16 and torch.equal(z, b.contiguous() * s)
    # a real (non-constant) operand: not applicable
    assert _constant_pointwise(aten.mul.Tensor, (x, torch.randn(1000, 1000)), {}) is None
    # not pointwise: not applicable
    assert _constant_pointwise(aten.sum.default, (x,), {}) is None


def test_constant_mask_write_is_a_fill_or_nothing():
    r = torch.zeros(300, 400, dtype=torch.uint8)
    on, off = _si(True, (300, 400), torch.bool), _si(False, (300, 400), torch.bool)
    out = _constant_mask_write(aten.index_put_.default, (r, [off], torch.tensor(7, dtype=torch.uint8)), {}, True)
    assert out is r and int(r.sum()) == 0
    out = _constant_mask_write(aten.index_put_.default, (r, [on], torch.tensor(7, dtype=torch.uint8)), {}, True)
    assert out is r and bool((r == 7).all())
    f = _constant_mask_write(aten.masked_fill.Scalar, (r, off, 3), {}, False)
    assert f is not r and bool((f == 7).all())


def test_the_large_result_decision_is_remembered_per_signature_only():
    """_large_result sizes a call on the meta device once per signature (shapes, strides,
    offset, dtype, other arguments); a call that differs in any of them is sized again."""
    from solbench.sol.counting import _NOT_LARGE, STAND_IN_BYTES, _large_result, _sig_key

    small = torch.zeros(256, 256)
    assert _large_result(aten.mul.Tensor, (small, small), {}) is None
    assert _sig_key(aten.mul.Tensor, (small, small), {}) in _NOT_LARGE
    assert _large_result(aten.mul.Tensor, (small, small), {}) is None  # remembered
    # the same numel at another stride, or another dtype, is another signature
    assert _sig_key(aten.mul.Tensor, (small.t(), small), {}) != _sig_key(aten.mul.Tensor, (small, small), {})
    assert _sig_key(aten.mul.Tensor, (small.double(), small), {}) != _sig_key(aten.mul.Tensor, (small, small), {})
    # 16M fp32 elements by expand (no memory): the result of the add is 64 MiB, a stand-in, every time
    n = STAND_IN_BYTES // 4
    big = torch.zeros(1).expand(n)
    for _ in range(2):
        out = _large_result(aten.add.Tensor, (big, 1.0), {})
        assert out is not None and _is_stand_in(out) and out.shape == (n,)
    # 16M int64 elements times 1 is int64 (no stand-in, remembered as not large); times 1.0 it
    # is 16M float32 = 64 MiB, a stand-in: 1 == 1.0 in Python, but the signature tells them apart
    ints = torch.zeros(1, dtype=torch.int64).expand(n)
    assert _large_result(aten.mul.Scalar, (ints, 1), {}) is None
    f = _large_result(aten.mul.Scalar, (ints, 1.0), {})
    assert f is not None and _is_stand_in(f) and f.dtype == torch.float32 and f.shape == (n,)
    # a factory call: randperm(256) is small (sized once), randn of 64 MiB is not
    assert _large_result(aten.randperm.default, (256,), {"device": torch.device("cpu")}) is None
    r = _large_result(aten.randn.default, ([n],), {"device": torch.device("cpu")})
    assert r is not None and _is_stand_in(r)


def test_a_large_product_is_a_stand_in_and_moves_no_other_fill(monkeypatch):
    """A matmul-class output of STAND_IN_BYTES or more is a stand-in (as any op's large result
    is), valued from fill k's own generator: the global generator is not drawn from and the
    next fill is still fill k+1, with the values it had before."""
    import solbench.sol.counting as counting

    monkeypatch.setattr(counting, "STAND_IN_BYTES", 8 << 10)
    mode = counting._CountingMode(counting.Counts(), short_circuit=True)
    x, w = torch.randn(64, 4), torch.randn(4, 64)          # 64 x 64 fp32 product: 16 KiB
    rng = torch.get_rng_state()
    big, unfilled = mode._fake_output(aten.mm.default, (x, w), {})
    assert torch.equal(torch.get_rng_state(), rng) and unfilled == []
    assert _is_stand_in(big) and big.shape == (64, 64) and big.dtype == torch.float32
    expected = float(torch.rand(1, generator=torch.Generator().manual_seed(0))[0] + 0.5)
    assert float(big[63, 5]) == expected and 0.5 <= expected < 1.5
    small, _ = mode._fake_output(aten.mm.default, (x[:8], w[:, :8]), {})   # 8 x 8: 256 B, filled
    assert not _is_stand_in(small) and mode.fills == 2
    ref = torch.randn((8, 8), generator=torch.Generator().manual_seed(1)).mul_(0.1)
    assert torch.equal(small, ref)


def test_a_reference_reading_a_large_product_counts_on_its_stand_in(tmp_path, monkeypatch):
    """End to end: the reference reads how many product elements are positive and returns
    that many ones. The 64 x 64 product is a stand-in holding one value in (0.5, 1.5), so all
    4,096 are positive (a random fill would give about half): one output of 4,096 elements."""
    import json

    import solbench.sol.counting as counting
    from solbench.spec import load_problem

    monkeypatch.setattr(counting, "STAND_IN_BYTES", 8 << 10)
    d = tmp_path / "p"
    d.mkdir()
    ref = ("import torch\n"
           "def run(x, w):\n"
           "    y = x @ w\n"
           "    n = int((y > 0).sum().item())\n"
           "    return torch.ones(n)\n")
    defn = {"name": "p", "axes": {"N": {"type": "var"}, "K": {"type": "const", "value": 4}},
            "inputs": {"x": {"shape": ["N", "K"], "dtype": "float32"},
                       "w": {"shape": ["K", "N"], "dtype": "float32"}},
            "outputs": {"y": {"shape": ["N"], "dtype": "float32"}}, "reference": ref}
    (d / "definition.json").write_text(json.dumps(defn))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {"N": 64}, "inputs": {
        "x": {"type": "random"}, "w": {"type": "random"}}}) + "\n")
    p = load_problem(d)
    c = counting.count_workload(p, p.workloads[0])
    assert c.real_tensors and [n for n, _, _ in c.outputs] == [64 * 64]
    assert not any(n.startswith(counting.FILLED_NOTE) for n in c.notes)  # nothing unfilled was read


def test_extremum_of_a_stand_in_is_its_value_in_a_real_tensor():
    """max/min of a whole stand-in and amax/amin over some of its dims hold its one value: the
    result is a real tensor (not a stand-in: later in-place writes into it must happen) with
    the shape, strides and dtype the CPU kernel gives, and equal to what it computes.
    max.dim (values and indices) and a non-stand-in operand are left to the kernel."""
    from solbench.sol.counting import _constant_extremum, stand_in_value

    x = stand_in_value((2, 64, 32, 16), torch.float32, 0.75)
    for func, args in [(aten.max.default, (x,)), (aten.min.default, (x,)), (aten.amax.default, (x, [-1])),
                       (aten.amin.default, (x, [1, 2], True)), (aten.amax.default, (x, []))]:
        got, ref = _constant_extremum(func, args, {}), func(*args)
        assert got is not None and not _is_stand_in(got)
        assert got.shape == ref.shape and got.stride() == ref.stride() and got.dtype == ref.dtype
        assert torch.equal(got, ref) and bool((got == 0.75).all())
    assert _constant_extremum(aten.amax.default, (x, [-1]), {}).shape == (2, 64, 32)
    assert _constant_extremum(aten.max.dim, (x, 1), {}) is None
    assert _constant_extremum(aten.amax.default, (torch.ones(4, 4), [0]), {}) is None
    # through the counting mode: the reference's amax of a stand-in gives the same counts
    # (2*64*32*16 = 65,536 fp32 elements read, 4,096 written) as on a materialised copy
    from solbench.sol.counting import Counts, _CountingMode
    counts = []
    for t in (x, x.contiguous()):
        c = Counts()
        with _CountingMode(c, short_circuit=True):
            out = torch.amax(t, dim=-1)
        assert out.shape == (2, 64, 32) and bool((out == 0.75).all())
        counts.append((c.bytes_unfused, dict(c.op_counts), dict(c.cuda_flops)))
    assert counts[0] == counts[1] and counts[0][0] == (65536 + 4096) * 4


def _two_input_problem(tmp_path, ref, n=64, dtype="float32"):
    import json

    from solbench.spec import load_problem

    d = tmp_path / "p"
    d.mkdir()
    defn = {"name": "p", "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N", "N"], "dtype": dtype}, "w": {"shape": ["N", "N"], "dtype": dtype}},
            "outputs": {"y": {"shape": ["N", "N"], "dtype": dtype}}, "reference": ref}
    (d / "definition.json").write_text(json.dumps(defn))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {"N": n}, "inputs": {
        "x": {"type": "random"}, "w": {"type": "random"}}}) + "\n")
    return load_problem(d)


def test_a_large_broadcast_view_of_an_input_is_a_view_and_its_reads_count(tmp_path, monkeypatch):
    """A view aliases its operand: a large broadcast of an input (a GQA ``expand``, a
    ``repeat_interleave``) stays a view, not a stand-in, so the copy that reads it reads the
    input. The MoE reference L2/047 and the nvfp4 MLP 029 had an input counted as never read
    (36 MB and 134 MB missing from their compulsory bytes) through such a view."""
    import solbench.sol.counting as counting

    monkeypatch.setattr(counting, "STAND_IN_BYTES", 8 << 10)  # the 8 x 64 x 64 fp32 broadcast: 128 KiB
    ref = ("import torch\n"
           "def run(x, w):\n"
           "    k = int((w[:, 0] > 0).sum().item())\n"  # a value read: counted on real tensors
           "    xe = x[:, None, :].expand(64, 8, 64).reshape(512, 64)\n"
           "    return xe * float(k)\n")
    p = _two_input_problem(tmp_path, ref)
    c = counting.count_workload(p, p.workloads[0])
    assert c.real_tensors
    reads = {name: r for name, _, _, _, r in c.inputs}
    assert reads["x"] == 64 * 64 * 4  # hand count: every element of x read once
    assert not any("input x is never read" in n for n in c.notes)
    # the same reference without the value read, counted on the meta device (no stand-ins),
    # reads x alike
    (tmp_path / "p").rename(tmp_path / "real")
    q = _two_input_problem(tmp_path, ref.replace("int((w[:, 0] > 0).sum().item())", "3"))
    meta = counting.count_workload(q, q.workloads[0])
    assert not meta.real_tensors and {name: r for name, _, _, _, r in meta.inputs}["x"] == reads["x"]


def test_a_copy_of_a_broadcast_input_may_be_the_broadcast_itself(tmp_path):
    """x.expand(8, 64, 64).clone() has the values of the view x.expand(8, 64, 64), which an
    implementation may return (the harness takes any plain tensor of the output's shape and
    dtype and copies it out after the clock): nothing must be written, x need not be read."""
    from solbench.sol.counting import count_workload

    ref = ("import torch\n"
           "def run(x, w):\n"
           "    return x.expand(8, 64, 64).clone()\n")
    p = _two_input_problem(tmp_path, ref)
    c = count_workload(p, p.workloads[0])
    assert [(n, w, alias) for n, _, _, w, alias in c.output_writes] == [(8 * 64 * 64, 0, "x")]
    assert c.bytes_fused == 0 and c.bytes_outputs_certain == 0
