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
from solbench.harness import protocol, workers
from solbench.harness.workers import TIMED_WINDOWS
from solbench.spec import Status, load_problem

from harness_helpers import py_solution, write_problem

REF = "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n"


def _problem(root, ref: str = REF, n: int = 2, custom: bool = False):
    d = {"name": "warm_softmax", "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 16}},
         "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
         "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}}, "reference": ref}
    src = {"type": "custom"} if custom else {"type": "random"}
    if custom:
        d["custom_inputs_entrypoint"] = "get_inputs"
    wls = [{"uuid": f"w{i}", "axes": {"rows": 4 + i}, "inputs": {"x": src}} for i in range(n)]
    return load_problem(write_problem(root, d, wls))


def _cfg(**kw) -> EvalConfig:
    base = dict(device="cpu", rounds=2, iters=3, warmup=1, seed=5, first_call_timeout_s=30.0,
                call_timeout_s=30.0, build_timeout_s=120.0)
    base.update(kw)
    return EvalConfig(**base)


@pytest.fixture
def slow_warm(monkeypatch):
    """The device check on; the warm-up's calls preceded by WARM_DELAY_S (a slow first CUDA
    launch); every request made on the prestart thread recorded as (op, monotonic time)."""
    monkeypatch.setattr(workers, "_warms", lambda device: True)
    sent: list[tuple[str, float]] = []
    real = protocol.request

    def spy(h, req, *a, **k):
        if threading.current_thread().name == "solbench-ref-prestart":
            sent.append((req.op, time.monotonic()))
        return real(h, req, *a, **k)

    monkeypatch.setattr(protocol, "request", spy)
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
