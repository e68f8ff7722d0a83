"""Attacks on the reference's warm-up (harness.workers.ReferenceWorkers._warm, red27).

The prestart thread (worker start, build, and on CUDA the warm-up's set and calls) is joined
by ``ReferenceWorkers.handle()`` only on the path that times the reference. These tests (on
the CPU, the device check turned on as in test_reference_warm.py, the warm-up slowed down as
a first CUDA launch that loads many modules would be) look at the other paths:

* the first workload's memory plan leaves the reference's timing out (``_workload_planned``):
  nothing joined the prestart thread, so its warm calls ran inside the candidate's timed window;
* an evaluation that ends before any timing (a candidate that does not compile, or is wrong
  everywhere) returned with the prestart thread still running: in ``solbench serve``, which
  keeps an Evaluator per problem, its warm calls then run beside another problem's window;
* a custom-input workload's throwaway set is made on its own thread with the process-global
  generator (``seed_global``) while the parent makes the first workload's real sets: the
  draws of the two interleave and the real inputs are no longer those of their seed."""

import threading
import time
import types

import pytest

from solbench.harness import EvalConfig, Evaluator
from solbench.harness import workers
from solbench.harness.workers import TIMED_WINDOWS
from solbench.spec import Status, load_problem

from harness_helpers import py_solution
from test_reference_warm import REF, REF_DIES_FIRST, _problem, prestart_requests
from test_reference_warm import _cfg as _cfg_base

def _cfg(**kw) -> EvalConfig:
    return _cfg_base(**{"rounds": 2, **kw})


@pytest.fixture
def slow_warm(monkeypatch):
    """The device check on; the warm-up's calls preceded by WARM_DELAY_S (a slow first CUDA
    launch); every request made on the prestart thread recorded as (op, monotonic time)."""
    sent = prestart_requests(monkeypatch)
    real_warm = workers.ReferenceWorkers._warm

    def warm(self, h, pool, scalars):
        time.sleep(WARM_DELAY_S)
        return real_warm(self, h, pool, scalars)

    monkeypatch.setattr(workers.ReferenceWorkers, "_warm", warm)
    return sent


WARM_DELAY_S = 4.0


def test_warm_calls_stay_out_of_the_window_when_the_plan_drops_the_reference_timing(
        tmp_path, solbench_cache, slow_warm, monkeypatch):
    sent = slow_warm
    p = _problem(tmp_path / "p", n=1)
    plan = types.SimpleNamespace(fits=True, reference_timing=False, notes=["reference timing left out"],
                                 describe=lambda: "a plan", evidence=lambda: {})
    monkeypatch.setattr(Evaluator, "_memory_plan", lambda self, w, solution: plan)
    n0 = len(TIMED_WINDOWS)
    ev = Evaluator(p, _cfg())
    try:
        (t,) = ev.evaluate(py_solution("honest", REF, p.definition.name))
    finally:
        ev.close()
    assert t.evaluation.status == Status.PASSED, t.evaluation.log
    assert t.evaluation.reference_timing is None  # the plan's choice stands
    windows = [w for w in list(TIMED_WINDOWS)[n0:] if w[0] == "cpu"]
    assert windows and sent
    inside = [(op, t) for op, t in sent for w in windows if w[1] <= t <= w[2]]
    assert not inside, f"the reference's warm-up ran inside the candidate's timed window: {inside}"
    assert max(t for _, t in sent) < min(w[1] for w in windows)


def test_no_prestart_thread_outlives_an_evaluation_that_timed_nothing(tmp_path, solbench_cache, slow_warm):
    p = _problem(tmp_path / "p", n=1)
    ev = Evaluator(p, _cfg())
    try:
        (t,) = ev.evaluate(py_solution("nocompile", "import torch\ndef run(x):\n    return (\n",
                                       p.definition.name))
        assert t.evaluation.status == Status.COMPILE_ERROR
        left = [th.name for th in threading.enumerate() if th.name.startswith("solbench-ref-")]
        assert not left, f"threads of the evaluation still running after it returned: {left}"
    finally:
        ev.close()


REF_CUSTOM = REF + """
import threading, time

LOG = []


def get_inputs(axes, device):
    # two draws from the global generator seed_global seeded, apart (a set quantised on the
    # CPU); the maker's is slow to start (a bigger set), so it draws while the parent makes
    # the real sets
    if threading.current_thread().name == "solbench-ref-warm-set":
        time.sleep(2.0)  # seeded, then slow to start drawing
    s0 = torch.initial_seed()
    a = torch.rand(axes["rows"], 16)
    time.sleep(0.5)
    b = torch.rand(axes["rows"], 16)
    g = torch.Generator().manual_seed(s0)
    ok = torch.equal(a, torch.rand(axes["rows"], 16, generator=g)) and \\
        torch.equal(b, torch.rand(axes["rows"], 16, generator=g))
    LOG.append((threading.current_thread().name, ok))
    return {"x": (a + b).to(device)}
"""


def test_custom_inputs_are_their_seeds_while_the_warm_set_is_made(tmp_path, solbench_cache, monkeypatch):
    monkeypatch.setattr(workers, "_warms", lambda device: True)
    p = _problem(tmp_path / "p", REF_CUSTOM, n=1, custom=True)
    spares = workers.SparePool("cpu", 1)
    spares.fill()
    ev = Evaluator(p, _cfg(), spares=spares)
    try:
        time.sleep(6.0)  # the spare ready: the candidate's worker is a handover and a build
        (t,) = ev.evaluate(py_solution("honest", REF, p.definition.name))
    finally:
        ev.close()
        spares.close()
    log = p.reference_module().LOG
    assert any(name == "solbench-ref-warm-set" for name, _ in log), log
    bad = [(name, ok) for name, ok in log if not ok]
    assert not [b for b in bad if b[0] == "MainThread"], f"real input sets not their seed's: {bad} of {log}"
    assert not bad, f"sets whose values are not their seed's (draws interleaved): {bad} of {log}"
    assert t.evaluation.status == Status.PASSED, t.evaluation.log


KB_SLOW = '''import threading, time
import torch
import torch.nn as nn

N = 16


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n, n))
        time.sleep(0.5)  # a model with many layers to initialise
        self.w2 = nn.Parameter(torch.randn(n, n))

    def forward(self, x):
        return x @ self.w1 @ self.w2


def get_inputs():
    x = torch.randn(8, N)
    if threading.current_thread().name == "solbench-ref-warm-set":
        for _ in range(16):  # a slow generation (a bigger set quantised in pieces on the CPU)
            time.sleep(0.25)
            torch.randn(4)
    return [x]


def get_init_inputs():
    return [N]
'''

KB_HONEST = '''import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n, n))
        self.w2 = nn.Parameter(torch.randn(n, n))

    def forward(self, x):
        return torch.mm(torch.mm(x, self.w1), self.w2)
'''


def test_kernelbench_truth_weights_are_not_drawn_beside_the_warm_set(tmp_path, solbench_cache, monkeypatch):
    """The parent builds the KernelBench Model for the truth (``Problem.make_reference``:
    ``torch.manual_seed(init_seed)`` then the layers' draws from the global generator) on the
    main thread while the warm-up's set (``get_inputs``, global generator too) is drawn on its
    own thread: the truth's weights were no longer the ones every worker builds, and an
    honest candidate read INCORRECT."""
    from solbench.spec import load_solution

    monkeypatch.setattr(workers, "_warms", lambda device: True)
    (tmp_path / "kb_slow.py").write_text(KB_SLOW)
    (tmp_path / "honest.py").write_text(KB_HONEST)
    p = load_problem(tmp_path / "kb_slow.py")
    spares = workers.SparePool("cpu", 1)
    spares.fill()
    ev = Evaluator(p, _cfg(), spares=spares)
    try:
        time.sleep(6.0)  # the spare ready: the candidate's worker is a handover and a build
        traces = ev.evaluate(load_solution(tmp_path / "honest.py", p))
    finally:
        ev.close()
        spares.close()
    assert [t.evaluation.status for t in traces] == [Status.PASSED] * len(traces), \
        [t.evaluation.log[-600:] for t in traces]


def test_warm_pools_of_dead_reference_workers_are_freed(tmp_path, solbench_cache, monkeypatch):
    """A reference worker that dies (in its warm-up calls here; an OOM or a timed-out block
    does the same) is started again, warm-up and all, at the next candidate of a long-lived
    Evaluator (``solbench serve``, ``run``'s Session): every one of those throwaway sets was
    kept until ``close()``, which an honest candidate never calls, up to 64 MiB of device
    memory each."""
    monkeypatch.setattr(workers, "_warms", lambda device: True)
    p = _problem(tmp_path / "p", REF_DIES_FIRST, n=1)
    ev = Evaluator(p, _cfg())
    try:
        for i in range(3):
            (t,) = ev.evaluate(py_solution(f"honest{i}", REF, p.definition.name))
            assert t.evaluation.status == Status.PASSED, t.evaluation.log
        live = [pool for pool in ev.refs._warm_pools if pool._make is not None]
        assert len(live) <= 1, f"{len(live)} warm-up sets kept for workers that are gone"
    finally:
        ev.close()
    assert not ev.refs._warm_pools
