"""Issue 35 item 7: large CPU input sets are drawn in chunks on a thread pool
(``inputs.generate._iid``). What a fresh set proves must not change: the same seed gives the
same values whatever the number of threads, another seed gives other values everywhere
(every chunk), the distributions are upstream's, and small inputs keep their values."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from solbench.inputs import generate as G
from solbench.inputs import make_inputs
from solbench.spec import load_problem

N = 3 * G.PARALLEL_CHUNK + 12345  # four chunks, the last one short


@pytest.fixture
def big(tmp_path):
    d = tmp_path / "big"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": "big", "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"},
                   "down_proj_weight": {"shape": ["n", 1], "dtype": "bfloat16"},
                   "ln_rstd": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "import torch\ndef run(x, down_proj_weight, ln_rstd):\n    return x\n"}))
    (d / "workload.jsonl").write_text("".join(json.dumps(
        {"uuid": u, "axes": {"n": n}, "inputs": {k: {"type": "random"} for k in ("x", "down_proj_weight", "ln_rstd")}})
        + "\n" for u, n in (("big", N), ("small", 1000))))
    return load_problem(d)


def _with_pool(workers: int):
    old = list(G._POOL)
    G._POOL[:] = [ThreadPoolExecutor(max_workers=workers)]
    return old


def test_same_seed_same_values_whatever_the_thread_count(big):
    w = big.workloads[0]
    old = _with_pool(1)
    try:
        one = make_inputs(big, w, 7)
        G._POOL[:] = [ThreadPoolExecutor(max_workers=4)]
        four = make_inputs(big, w, 7)
        G._POOL[:] = [None]  # $SOLBENCH_INPUT_THREADS=1: every chunk in the calling thread
        inline = make_inputs(big, w, 7)
    finally:
        G._POOL[:] = old
    for k in one:
        assert torch.equal(one[k], four[k]) and torch.equal(one[k], inline[k]), k


def test_another_seed_changes_every_chunk(big):
    w = big.workloads[0]
    a, b = make_inputs(big, w, 7)["x"], make_inputs(big, w, 8)["x"]
    for j in range(4):
        s = slice(j * G.PARALLEL_CHUNK, (j + 1) * G.PARALLEL_CHUNK)
        # two independent standard normals agree bit for bit with probability ~0 per element
        assert (a[s] == b[s]).float().mean() < 1e-3, j
    # and no chunk repeats another within one set (each chunk has its own generator)
    c = G.PARALLEL_CHUNK
    assert not torch.equal(a[:1000], a[c:c + 1000])


def test_distributions_are_upstreams(big):
    """randn: mean 0, std 1 (4.2M samples: standard error 5e-4); weight_fan_in: std
    1/sqrt(last dim) = 1 here, bf16; positive (rstd): |randn| + 0.1, minimum above 0.1,
    mean sqrt(2/pi) + 0.1 = 0.8979."""
    x = make_inputs(big, big.workloads[0], 3)
    assert abs(x["x"].mean().item()) < 5e-3 and abs(x["x"].std().item() - 1) < 5e-3
    assert x["down_proj_weight"].dtype == torch.bfloat16
    assert abs(x["down_proj_weight"].float().std().item() - 1) < 5e-3
    r = x["ln_rstd"]
    assert r.min().item() >= 0.1 and abs(r.mean().item() - (math.sqrt(2 / math.pi) + 0.1)) < 5e-3


def test_small_inputs_keep_their_values(big):
    """Below one chunk the single generator draws as before: the values of seed 5 equal a
    hand-made draw with torch.Generator().manual_seed(5) in definition order."""
    w = big.workloads[1]
    got = make_inputs(big, w, 5)
    g = torch.Generator().manual_seed(5)
    x = torch.randn((1000,), generator=g)
    wgt = (torch.randn((1000, 1), generator=g) / math.sqrt(1)).to(torch.bfloat16)
    rstd = torch.randn((1000,), generator=g).abs() + 0.1
    assert torch.equal(got["x"], x) and torch.equal(got["down_proj_weight"], wgt)
    assert torch.equal(got["ln_rstd"], rstd)


def test_large_draw_runs_on_several_threads(big, monkeypatch):
    """Before: one generator drew every value in the calling thread. Now a 4-chunk input
    is filled by the pool's threads (their names recorded as each chunk's seed is made)."""
    import threading

    seen = set()
    real = G._chunk_seed

    def spy(sub, j):
        seen.add(threading.current_thread().name)
        return real(sub, j)

    old = _with_pool(2)
    try:
        monkeypatch.setattr(G, "_chunk_seed", spy)
        make_inputs(big, big.workloads[0], 1)
    finally:
        G._POOL[:] = old
    assert threading.current_thread().name not in seen and len(seen) >= 1


def test_estimate_line_counts_every_input_set(tmp_path, capsys, monkeypatch):
    """The sets the notice counts equal the seeds the trace records (an independent count:
    one seed per set made). add2 (x, y randn fp32): 2 upstream rounds + stress + sparse
    stress = 4 rounds; 8 slots (7 more first fills), 3 timed calls each side, 2 re-checks
    after timing (one upstream, one sparse stress): 4 + 7 + 6 + 2 = 19."""
    from solbench import harness
    from solbench.harness import evaluator
    from solbench.spec import reference_solution

    d = tmp_path / "add2"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": "add2", "axes": {}, "inputs": {"x": {"shape": [64], "dtype": "float32"},
                                               "y": {"shape": [64], "dtype": "float32"}},
        "outputs": {"out": {"shape": [64], "dtype": "float32"}},
        "reference": "import torch\ndef run(x, y):\n    return x + y\n"}))
    (d / "workload.jsonl").write_text(json.dumps(
        {"uuid": "w0", "axes": {}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}}) + "\n")
    prob = load_problem(d)
    monkeypatch.setattr(evaluator, "NOTICE_S", 0.0)
    (t,) = harness.evaluate(prob, reference_solution(prob), harness.EvalConfig(device="cpu", rounds=2, iters=3))
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "input sets of" in x)
    assert line.startswith("add2 / w0: about ") and ": 19 input sets of 512 bytes" in line
    assert len(t.evaluation.input_seeds) == 19
    # the CPU default of 16 timed calls each side: 8 rounds + 7 first fills + 32 + 2 late = 49
    # sets; 49 x 0.5 s = 24.5 s, printed to the nearest second (round half to even: 24)
    assert evaluator.input_sets_notice("p", "u", 8, 8, harness.EvalConfig(device="cpu"), 0.5, 63_053_832,
                                       late=2) == "p / u: about 24 s: 49 input sets of 63,053,832 bytes (0.50 s each to make)"
