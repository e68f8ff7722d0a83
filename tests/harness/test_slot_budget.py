"""A workload too large for two slots gets one (EvalConfig.n_slots), and timing and its
defences still hold there; the parent's cached device memory is handed back before the
workers need it (slots.release_cached).

Why: with at least two slots always, a workload of 18.8 GB (L1/013 at its largest) took four
copies in the two workers' pools beside the parent's input sets, and the honest reference, run
as its own candidate, ran out of memory on a 141 GB H200."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, Evaluator, slots
from solbench.spec import Status

from harness_helpers import py_solution, relu_problem

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30


@pytest.mark.parametrize("wbytes, budget, want", [
    (18_800_000_000, 16 * GiB, 1),   # L1/013's largest workload: not one copy fits the budget
    (10 * GiB, 16 * GiB, 1),         # one fits, two do not
    (8 * GiB, 16 * GiB, 2),          # exactly two
    (3 * GiB, 16 * GiB, 5),          # 16 // 3
    (1 * GiB, 16 * GiB, 8),          # capped at max_pool
    (0, 16 * GiB, 8),                # a workload without tensors
])
def test_slot_count(wbytes, budget, want):
    assert EvalConfig(device="cpu", pool_bytes=budget).n_slots(wbytes) == want


def test_no_timing_one_slot():
    assert EvalConfig(device="cpu", timing=False).n_slots(1000) == 1


def _relu(tmp_path):
    return relu_problem(tmp_path, (4096,), uuid="w0")


def _evaluate(p, cfg, sol):
    # closed here: a reference worker left running keeps its process and its pids cgroup
    ev = Evaluator(p, cfg)
    try:
        return ev.evaluate(sol)
    finally:
        ev.close()


def _one_slot_cfg(**kw):
    # 4096 float32 in and out: 32,768 bytes a set; a budget of 1.5 sets leaves room for one
    return EvalConfig(device="cpu", iters=6, rounds=2, seed=11, pool_bytes=49_152, **kw)


def test_one_slot_honest_candidate_timed(tmp_path, solbench_cache):
    p = _relu(tmp_path)
    sol = py_solution("honest", "import torch\n\ndef run(x):\n    return torch.relu(x)\n", "relu")
    tr = _evaluate(p, _one_slot_cfg(), sol)[0]
    ev = tr.evaluation
    assert ev.status == Status.PASSED, (ev.status, ev.log[-400:])
    assert ev.timing is not None and ev.timing.n_samples == 6
    assert any(n.startswith("one input slot") for n in ev.timing.notes)


def test_one_slot_still_catches_a_cache_keyed_by_address(tmp_path, solbench_cache):
    """One address for every timed call: a cache keyed by data_ptr() hits on every call after
    the first and answers with stale values, which the fresh fills and the verified
    iterations expose (the same hostile as the corpus's, on a relu)."""
    p = _relu(tmp_path)
    src = (ROOT / "tests/adversarial/hostile/data_ptr_cache.py").read_text()
    src = src.replace('F.gelu(x, approximate="tanh")', "x.relu()")
    assert "x.relu()" in src
    sol = py_solution("cache", src, "relu")
    tr = _evaluate(p, _one_slot_cfg(), sol)[0]
    assert tr.evaluation.status in (Status.INCORRECT_NUMERICAL, Status.REWARD_HACK), tr.evaluation.status


def test_release_cached_is_a_no_op_on_the_cpu():
    assert slots.release_cached("cpu") == 0


def test_cached_idle_bytes_reads_the_statistics_as_torch_does(monkeypatch):
    """Without a GPU: the allocator's statistics faked (96 MiB reserved, 40 MiB allocated),
    ``slots.cached_idle_bytes`` gives torch's own ``memory_reserved - memory_allocated`` over
    the same statistics, 56 MiB, from one read of them; with CUDA never initialised, 0."""
    if not torch.cuda.is_initialized():
        assert slots.cached_idle_bytes("cuda") == 0

    def stat(cur):
        return {"current": cur, "peak": cur + 99, "allocated": cur + 7, "freed": 7}

    fake = {"reserved_bytes": {"all": stat(96 << 20), "large_pool": stat(80 << 20), "small_pool": stat(16 << 20)},
            "allocated_bytes": {"all": stat(40 << 20), "large_pool": stat(36 << 20), "small_pool": stat(4 << 20)}}
    calls = []

    def nested(device=None):
        calls.append(device)
        return fake

    monkeypatch.setattr(torch.cuda.memory, "memory_stats_as_nested_dict", nested)
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict", nested)
    want = torch.cuda.memory_reserved("cuda:0") - torch.cuda.memory_allocated("cuda:0")
    calls.clear()
    assert slots.cached_idle_bytes("cuda:0") == want == 56 << 20
    assert calls == ["cuda:0"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cached_idle_bytes_is_reserved_less_allocated():
    """``slots.cached_idle_bytes`` (one read of the allocator's nested statistics) equals
    torch's own ``memory_reserved - memory_allocated`` with nothing cached, with 64 MiB
    freed into the cache, and after the cache is emptied."""
    dev = "cuda"

    def torch_figure():
        return torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)

    torch.cuda.empty_cache()
    assert slots.cached_idle_bytes(dev) == torch_figure()
    x = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    del x
    assert slots.cached_idle_bytes(dev) == torch_figure() >= 64 << 20
    torch.cuda.empty_cache()
    assert slots.cached_idle_bytes(dev) == torch_figure()


def test_parent_out_of_memory_is_recorded_and_the_run_goes_on(tmp_path, solbench_cache, monkeypatch):
    """A device-memory shortage of the parent's own judging (torch.OutOfMemoryError raised in
    the parent, as on the H200 before the fixes above) is no verdict on the candidate: the
    workload ends INVALID_REFERENCE naming it, and the next workload is evaluated."""
    from solbench.harness.rounds import Oracle

    p = relu_problem(tmp_path, (4096, 2048), name="relu2")
    real = Oracle.judge

    def judge(self, outs, *a, **kw):
        if outs[0].numel() == 4096:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 10.00 GiB.")
        return real(self, outs, *a, **kw)

    monkeypatch.setattr(Oracle, "judge", judge)
    sol = py_solution("honest", "import torch\n\ndef run(x):\n    return torch.relu(x)\n", "relu2")
    trs = _evaluate(p, EvalConfig(device="cpu", iters=4, rounds=2, seed=3), sol)
    assert [t.evaluation.status for t in trs] == [Status.INVALID_REFERENCE, Status.PASSED]
    assert "ran out of device memory" in trs[0].evaluation.log


def test_reference_timing_out_of_memory_frees_it_and_is_not_retried(tmp_path, solbench_cache, monkeypatch):
    """The reference's own buffers (SlotPool.twin) did not fit beside the candidate's on the
    H200 (the 18.8 GB workload): the reference's worker is killed at once (it was dropped
    alive and kept its device memory), no later block starts another, and the candidate's
    timing goes on: PASSED, no reference time, one reference_timing_failed finding."""
    from solbench.harness import process

    p = _relu(tmp_path)
    twins, killed = [], []
    real_kill = process.WorkerHandle.kill

    def twin(self, flush=None):
        twins.append(1)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 5.00 GiB.")

    def kill(self):
        import inspect

        killed.append(inspect.stack()[1].function)  # who killed it: the failed reference block's handler
        return real_kill(self)

    monkeypatch.setattr(slots.SlotPool, "twin", twin)
    monkeypatch.setattr(process.WorkerHandle, "kill", kill)
    sol = py_solution("honest", "import torch\n\ndef run(x):\n    return torch.relu(x)\n", "relu")
    ev = _evaluate(p, EvalConfig(device="cpu", iters=12, rounds=2, seed=5, reference_timing=True), sol)[0].evaluation
    assert ev.status == Status.PASSED, (ev.status, ev.log[-400:])
    assert ev.timing is not None and ev.timing.n_samples >= 6
    assert ev.performance.reference_latency_ms is None
    assert [f.check for f in ev.findings].count("reference_timing_failed") == 1
    assert len(twins) == 1 and "_reference_failed" in killed
