"""Counting a problem's workloads together (batch.problem_counts), the counts cache, and the
cheaper per-op helpers the counting modes use (each against the code path it replaces)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
import torch
from torch.utils._pytree import tree_map

from solbench.sol import bound_from_counts, count_workload, load_hardware
from solbench.sol.batch import problem_counts, problem_rows
from solbench.sol.cache import CountsCache, counts_from_json, counts_to_json, workload_key
from solbench.sol.counting import map_tree
from solbench.spec import load_problem

#: reads a value (so the meta and fake runs fail) unless x has more than 64 elements
DATA_DEPENDENT = """import torch
def run(x):
    if x.shape[0] > 64:
        return x * 2.0
    s = float(x.sum().item())
    return x * s
"""


def _problem(tmp_path: Path, reference: str, ns: list[int], name: str = "dd"):
    d = tmp_path / name
    d.mkdir()
    defn = {"name": name, "axes": {"N": {"type": "var"}}, "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
            "outputs": {"y": {"shape": ["N"], "dtype": "float32"}}, "reference": reference}
    (d / "definition.json").write_text(json.dumps(defn))
    (d / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"w{i}", "axes": {"N": n}, "inputs": {"x": {"type": "random"}}}) + "\n"
        for i, n in enumerate(ns)))
    return load_problem(d)


def test_problem_counts_skips_the_fake_retry_and_counts_as_before(tmp_path):
    p = _problem(tmp_path, DATA_DEPENDENT, [16, 32, 128])
    together = problem_counts(p)
    alone = [count_workload(p, w) for w in p.workloads]
    # hand-worked: N fp32 elements read, N written (8N bytes); N-element mul on the CUDA cores
    for n, c, a in zip([16, 32, 128], together, alone):
        assert c.bytes_fused == a.bytes_fused == 8 * n
        assert c.mode == a.mode
        assert dict(c.cuda_flops) == dict(a.cuda_flops)
        assert dict(c.cuda_by_precision) == dict(a.cuda_by_precision)
        assert c.sfu_ops == a.sfu_ops
    assert [c.mode for c in together] == ["real", "real", "meta"]  # the meta run is still tried first
    assert together[0].fake_error and "earlier workload" not in together[0].notes[-1]
    assert "on an earlier workload of this problem" in together[1].notes[-1]
    assert together[1].fake_error == together[0].fake_error


def test_problem_rows_equal_the_per_workload_rows(tmp_path):
    from solbench.sol.batch import workload_row

    p = _problem(tmp_path, DATA_DEPENDENT, [16, 128])
    hw = load_hardware("H200")
    rows = problem_rows(p, hw, "refined")["workloads"]
    for r, w in zip(rows, p.workloads):
        one = workload_row(p, w, hw, "refined")
        assert r["sol_ms"] == one["sol_ms"] and r["terms_ms"] == one["terms_ms"]
        assert r["sol_ms_by_model"] == one["sol_ms_by_model"]


def test_counts_round_trip_through_json_exactly(tmp_path):
    p = _problem(tmp_path, DATA_DEPENDENT, [16, 128])
    for c in problem_counts(p):
        back = counts_from_json(json.loads(json.dumps(counts_to_json(c))))
        for m, hw in (("refined", "H200"), ("solar", "B200")):
            a = bound_from_counts(c, load_hardware(hw), m).to_json()
            b = bound_from_counts(back, load_hardware(hw), m).to_json()
            assert a == b
        # the entry keeps the solar model's figures, not the layer graph
        assert back.solar_graph is None and back.solar() == c.solar_graph.totals()
        assert back.op_counts == c.op_counts and back.fake_error == c.fake_error


def test_cache_hits_misses_and_keys(tmp_path):
    p = _problem(tmp_path, DATA_DEPENDENT, [16, 128])
    cache = CountsCache(tmp_path / "cache")
    first = problem_counts(p, cache=cache)
    assert (cache.hits, cache.misses) == (0, 2)
    again = problem_counts(p, cache=cache)
    assert (cache.hits, cache.misses) == (2, 2)
    assert [c.bytes_fused for c in again] == [c.bytes_fused for c in first] == [128, 1024]
    # the key follows the workload and the reference source
    k0, k1 = workload_key(p, p.workloads[0]), workload_key(p, p.workloads[1])
    assert k0 != k1
    q = _problem(tmp_path, DATA_DEPENDENT.replace("2.0", "3.0"), [16, 128], name="dd2")
    assert workload_key(q, q.workloads[0]) != k0
    # an entry that is not a Counts is a miss, and is counted afresh
    entry = next((tmp_path / "cache").rglob(f"{k0}.json"))
    entry.write_text('{"mode": "meta"}')
    assert cache.get(p, p.workloads[0]) is None
    assert problem_counts(p, cache=cache)[0].bytes_fused == 128


Pair = collections.namedtuple("Pair", "a b")


def test_map_tree_matches_pytree():
    t = torch.ones(2, 3)
    tree = (t, [1, torch.Size([4, 5]), (t, None)], {"k": t, "s": "x"}, Pair(t, 2.0))
    f = lambda x: x.shape if isinstance(x, torch.Tensor) else x  # noqa: E731
    assert map_tree(f, tree) == tree_map(f, tree)
    assert type(map_tree(f, tree)[3]) is Pair
    assert map_tree(f, torch.Size([2])) == torch.Size([2])


@pytest.mark.parametrize("a,b", [((4, 8), (8, 16)), ((3, 4, 8), (3, 8, 2))])
def test_raw_flop_formula_equals_the_wrapped_one(a, b):
    from torch.utils.flop_counter import flop_registry

    from solbench.sol.counting import _shape_of

    op = torch.ops.aten.mm if len(a) == 2 else torch.ops.aten.bmm
    x, y = torch.empty(a, device="meta"), torch.empty(b, device="meta")
    out = op(x, y)
    fn = flop_registry[op]
    raw = fn.__wrapped__(*map_tree(_shape_of, (x, y)), out_shape=_shape_of(out))
    assert raw == fn(x, y, out_val=out) == 2 * out.numel() * a[-1]


CLONE_AND_DROP = """import torch
def run(x):
    for _ in range(20):
        t = x.clone()
        del t
    u = torch.ones(x.shape, dtype=x.dtype, device=x.device)
    return u + 1.0
"""


@pytest.mark.parametrize("real", [False, True])
def test_a_dropped_copy_of_an_input_lends_its_address_to_no_later_tensor(tmp_path, real):
    """A clone of x is registered as x (an output may be x updated in place). Once dropped, its
    storage address went to the next allocation of the same size (u), whose reads counted as
    reads of x: 16,384 phantom bytes here, and a run-to-run spread in FlashInfer 020's bound."""
    from solbench.sol.counting import _run_once

    d = tmp_path / "p"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": "p", "axes": {}, "inputs": {"x": {"shape": [4096], "dtype": "float32"}},
        "outputs": {"y": {"shape": [4096], "dtype": "float32"}}, "reference": CLONE_AND_DROP}))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w", "axes": {}, "inputs": {"x": {"type": "random"}}}) + "\n")
    p = load_problem(d)
    c = _run_once(p, p.workloads[0], real=real) if real else count_workload(p, p.workloads[0])
    assert c.inputs == [("x", 4096, 4.0, "fp32", 0.0)]  # x itself is never read
    assert c.bytes_fused == 4096 * 4  # the output only


def test_full_collections_are_rare_while_a_problem_is_counted_and_restored_after(tmp_path, monkeypatch):
    """While a problem's workloads are counted the collector's third threshold is at least
    FULL_COLLECTION_EVERY; the caller's thresholds come back afterwards, and the counts are
    the hand-worked ones (8N bytes: N fp32 read, N written)."""
    import gc

    from solbench.sol import batch, counting

    seen = []
    real = counting.count_workload

    def spy(*a, **k):
        seen.append(gc.get_threshold())
        return real(*a, **k)

    # batch imports the counter when a workload must be counted (torch only then)
    monkeypatch.setattr(counting, "count_workload", spy)
    before = gc.get_threshold()
    p = _problem(tmp_path, DATA_DEPENDENT, [16, 128])
    got = problem_counts(p)
    assert gc.get_threshold() == before
    assert [t[2] for t in seen] == [max(before[2], batch.FULL_COLLECTION_EVERY)] * 2
    assert [t[:2] for t in seen] == [before[:2]] * 2
    assert [c.bytes_fused for c in got] == [8 * 16, 8 * 128]


_FAULTS_SCRIPT = """
import resource, sys, torch
from solbench.sol import batch
if sys.argv[1] == "set":
    assert batch._reuse_freed_memory_once() is True
n = 11 * 1024 * 1024  # 44 MiB of fp32: above glibc's largest dynamic mmap threshold (32 MiB)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):  # a count's temporaries: a tensor, a mask of it, a result of its size
    a = torch.empty(n).fill_(1.0)
    m = a > 0.5
    b = a.abs()
    del a, m, b
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_freed_memory_is_reused_for_large_tensors():
    """With the batch's malloc setting, freed 44 MiB tensors' pages serve the next ones. By
    default each of the two fp32 tensors of a round is mapped afresh and faults its 11,264
    4-KiB pages in (20 rounds: 450,560 faults at least, the masks' aside); with it, a round
    mostly reuses the heap (small allocations landing in a freed block make it grow now and
    then). Run in subprocesses: the setting is process-wide."""
    import os
    import subprocess
    import sys

    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    faults = {}
    for how in ("default", "set"):
        out = subprocess.run([sys.executable, "-c", _FAULTS_SCRIPT, how], env=env, capture_output=True,
                             text=True, check=True)
        faults[how] = int(out.stdout.split()[-1])
    assert faults["default"] >= 20 * 2 * 11264 // 2  # huge pages would fault fewer times
    assert faults["set"] <= faults["default"] // 4
