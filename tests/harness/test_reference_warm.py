"""The reference's first calls in its new worker (harness.workers.ReferenceWorkers._warm).

On CUDA the prestart thread, once the reference's worker is built, runs the reference twice
on a throwaway input set of the first workload (or its stand-in), so what a process pays at
its first calls (CUDA loading each kernel's module) is not paid by the first timed block's
warm-up. Here, on the CPU, with the device check turned on: the calls come from the prestart
thread, all of them before the first timed window opens; the evaluation's verdicts are the
same; a reference worker that dies in those calls is closed and the evaluation goes on; the
buffers are freed when the evaluator closes."""

import threading
import time

import pytest

from solbench.harness import EvalConfig, Evaluator
from solbench.harness import protocol, workers
from solbench.harness.workers import TIMED_WINDOWS
from solbench.spec import Status, load_problem, reference_solution

from harness_helpers import py_solution, write_problem

REF = "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n"
#: dies at its first call inside a worker (never in the parent, which runs it for the truth)
REF_DIES_FIRST = """import os, sys
import torch

_calls = [0]

def run(x):
    _calls[0] += 1
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    if _calls[0] == 1 and main is not None and main.name == "solbench.harness.worker":
        os._exit(3)
    return torch.softmax(x, dim=-1)
"""


def _problem(root, ref: str = REF, n: int = 2, custom: bool = False):
    """A softmax problem of ``n`` workloads (rows 4, 5, ...), its input random or, with
    ``custom``, made by the reference's ``get_inputs`` entrypoint."""
    d = {"name": "warm_softmax", "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 16}},
         "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
         "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}}, "reference": ref}
    src = {"type": "custom"} if custom else {"type": "random"}
    if custom:
        d["custom_inputs_entrypoint"] = "get_inputs"
    wls = [{"uuid": f"w{i}", "axes": {"rows": 4 + i}, "inputs": {"x": src}} for i in range(n)]
    return load_problem(write_problem(root, d, wls))


def _cfg(**kw) -> EvalConfig:
    base = dict(device="cpu", rounds=3, iters=3, warmup=1, seed=5, first_call_timeout_s=30.0,
                call_timeout_s=30.0, build_timeout_s=120.0)
    base.update(kw)
    return EvalConfig(**base)


def prestart_requests(monkeypatch) -> list[tuple[str, float]]:
    """The device check turned on; returns the list every request made on the prestart
    thread is appended to, as (op, monotonic time)."""
    monkeypatch.setattr(workers, "_warms", lambda device: True)
    sent: list[tuple[str, float]] = []
    real = protocol.request

    def spy(h, req, *a, **k):
        if threading.current_thread().name == "solbench-ref-prestart":
            sent.append((req.op, time.monotonic()))
        return real(h, req, *a, **k)

    monkeypatch.setattr(protocol, "request", spy)
    return sent


@pytest.fixture
def record(monkeypatch):
    """The device check turned on; every request made on the prestart thread, (op, monotonic
    time); every warm-up's SlotPool, and the thread each throwaway set was made on."""
    sent = prestart_requests(monkeypatch)
    pools: list = []
    real_warm = workers.ReferenceWorkers._warm

    def warm(self, h, pool, scalars):
        ok = real_warm(self, h, pool, scalars)
        pools.extend(self._warm_pools)
        return ok

    monkeypatch.setattr(workers.ReferenceWorkers, "_warm", warm)
    made: list[tuple[str, float]] = []
    real_set = workers.ReferenceWorkers._warm_set

    def warm_set(self, w):
        made.append((threading.current_thread().name, time.monotonic()))
        return real_set(self, w)

    monkeypatch.setattr(workers.ReferenceWorkers, "_warm_set", warm_set)
    return sent, pools, made


def test_the_reference_makes_its_first_calls_before_any_timed_window(tmp_path, solbench_cache, record):
    sent, pools, made = record
    p = _problem(tmp_path / "p", REF)
    n0 = len(TIMED_WINDOWS)
    ev = Evaluator(p, _cfg())
    try:
        traces = ev.evaluate(reference_solution(p))
    finally:
        ev.close()
    assert [t.evaluation.status for t in traces] == [Status.PASSED, Status.PASSED]
    ops = [op for op, _ in sent]
    # (its start's own requests first: the profiler's warm-up)
    assert ops[-(2 + workers.WARM_CALLS):] == ["build", "load"] + ["call"] * workers.WARM_CALLS, ops
    # the throwaway set made on a thread of its own while the worker started and was built
    t_build = [t for op, t in sent if op == "build"][-1]
    assert len(made) == 1 and made[0][0] == "solbench-ref-warm-set" and made[0][1] < t_build, (made, t_build)
    first_window = min(w[1] for w in list(TIMED_WINDOWS)[n0:] if w[0] == "cpu")
    assert max(t for _, t in sent) < first_window
    # the reference's timed blocks ran (its worker kept, not started again)
    assert all(t.evaluation.reference_timing is not None for t in traces)
    assert pools and all(pool._make is None for pool in pools)  # closed with the evaluator


def test_a_reference_worker_that_dies_in_its_first_calls_is_closed_and_the_run_goes_on(
        tmp_path, solbench_cache, record):
    sent, _, _ = record
    p = _problem(tmp_path / "p", REF_DIES_FIRST)
    cand = py_solution("softmax", REF, p.definition.name)
    ev = Evaluator(p, _cfg())
    try:
        traces = ev.evaluate(cand)
        dead = [h for h in [ev.refs.worker] if h is not None]
    finally:
        ev.close()
    assert [op for op, _ in sent][-1] == "call"  # it got to its first call, and died there
    # the candidate is judged as before: its correctness and its own timing stand; the
    # reference's worker started again at the first block dies at its first call too
    assert [t.evaluation.status for t in traces] == [Status.PASSED, Status.PASSED], \
        [t.evaluation.log for t in traces]
    assert all(t.evaluation.timing is not None for t in traces)
    assert not any(h.alive for h in dead)
