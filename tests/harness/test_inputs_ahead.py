"""The next workload's inputs are made while the worker runs the current workload's last
integrity check (harness/evaluator.py, ``_ahead_maker``; docs/throughput.md): the parent
sends the ``guards`` request, makes the round plan, round 0's input set and the slot pool of
the next workload (nothing sent to the worker), then reads the reply. What is asserted: the
order of those steps; that the values, seeds and verdicts are those of an evaluation that
makes every workload's inputs in its turn; that inputs made ahead for a worker that is then
replaced, or for a workload that is then skipped, are released and never used; that making
them can fail without touching the current workload; and that a worker holding a reply
unread refuses another request."""

from __future__ import annotations

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, evaluator, protocol, slots
from solbench.harness.process import ProtocolError
from solbench.spec import Status

from harness_helpers import RELU, py_solution, relu_problem

HERE = Path(__file__).resolve().parent
SIZES = (1000, 2000, 3000)


def _cfg(**kw) -> EvalConfig:
    return EvalConfig(device="cpu", iters=4, rounds=2, seed=7, **kw)


def _figures(traces) -> list:
    return [(t.workload.uuid, t.evaluation.status, t.evaluation.input_seeds,
             t.evaluation.correctness.max_absolute_error if t.evaluation.correctness else None)
            for t in traces]


def test_next_inputs_are_made_during_the_guard_check_and_change_nothing(tmp_path, solbench_cache, monkeypatch):
    """Three workloads: the second and third get their inputs while the previous one's last
    ``guards`` request is unanswered (the event order shows it, and ``phases_s`` records
    ``inputs.ahead``); seeds, errors and statuses equal those of the same evaluation with
    nothing made ahead (AHEAD_MAX_BYTES = 0), under the same seed."""
    p = relu_problem(tmp_path, SIZES)
    sol = py_solution("honest", RELU, "relu")
    events: list[str] = []
    real_send, real_receive, real_inputs = protocol.send, protocol.receive, evaluator.Evaluator._inputs

    def send(h, req, timeout_s):
        if isinstance(req, protocol.Guards) and req.full:
            events.append("send full guards")
        return real_send(h, req, timeout_s)

    def receive(pending):
        if isinstance(pending.req, protocol.Guards) and pending.req.full:
            events.append("reply full guards")
        return real_receive(pending)

    def inputs(self, run):
        events.append(f"inputs of workload {run.j}")
        return real_inputs(self, run)

    monkeypatch.setattr(protocol, "send", send)
    monkeypatch.setattr(protocol, "receive", receive)
    monkeypatch.setattr(evaluator.Evaluator, "_inputs", inputs)
    ahead = evaluate(p, sol, _cfg())
    assert events == ["inputs of workload 0",
                      "send full guards", "inputs of workload 1", "reply full guards",
                      "send full guards", "inputs of workload 2", "reply full guards",
                      "send full guards", "reply full guards"], events
    assert [("inputs.ahead" in t.evaluation.phases_s) for t in ahead] == [False, True, True]
    monkeypatch.setattr(evaluator, "AHEAD_MAX_BYTES", 0)
    events.clear()
    turn = evaluate(p, sol, _cfg())
    assert events == ["inputs of workload 0", "send full guards", "reply full guards",
                      "inputs of workload 1", "send full guards", "reply full guards",
                      "inputs of workload 2", "send full guards", "reply full guards"], events
    assert all(t.evaluation.status == Status.PASSED for t in ahead + turn)
    assert _figures(ahead) == _figures(turn)


def test_inputs_made_for_a_replaced_worker_are_released_unused(tmp_path, solbench_cache, monkeypatch):
    """The first workload's worker dies during its last integrity check (killed by the
    parent right after the request, as a crash there would): that workload is not PASSED,
    the inputs made meanwhile for the second are released (their pool closed), and the
    second workload makes its own on the new worker and passes."""
    p = relu_problem(tmp_path, SIZES[:2])
    sol = py_solution("honest", RELU, "relu")
    real = evaluator.guard_request
    made: list = []
    closed: list = []
    killed = []

    def guard_request(run, when, full=True):
        pending = real(run, when, full)
        if when == "after timing" and not killed:
            killed.append(run.h.pid)
            run.h.kill()
        return pending

    real_init, real_close = slots.SlotPool.__init__, slots.SlotPool.close

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        made.append(self)

    def close(self):
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(evaluator, "guard_request", guard_request)
    monkeypatch.setattr(slots.SlotPool, "__init__", init)
    monkeypatch.setattr(slots.SlotPool, "close", close)
    t0, t1 = evaluate(p, sol, _cfg(reference_timing=False))
    assert t0.evaluation.status != Status.PASSED
    assert any(f.check == "guard_check_failed" for f in t0.evaluation.findings), t0.evaluation.findings
    assert t1.evaluation.status == Status.PASSED, t1.evaluation.log[-2000:]
    assert "inputs.ahead" not in t1.evaluation.phases_s
    # the first workload's pool, the one made during its check for the dead worker, the
    # second workload's own: all closed
    assert len(made) == 3 and all(m in closed for m in made)


def test_a_failure_making_inputs_ahead_leaves_the_current_workload_alone(tmp_path, solbench_cache, monkeypatch):
    """Making the second workload's inputs ahead raises (once): the first workload's trace is
    as before, and the second makes its inputs in its turn and passes."""
    p = relu_problem(tmp_path, SIZES[:2])
    sol = py_solution("honest", RELU, "relu")
    real = evaluator.make_set
    raised = []

    def make_set(run, spec):
        if run.j == 1 and not raised:
            raised.append(1)
            raise RuntimeError("a fault while making inputs ahead")
        return real(run, spec)

    monkeypatch.setattr(evaluator, "make_set", make_set)
    t0, t1 = evaluate(p, sol, _cfg())
    assert raised
    assert t0.evaluation.status == Status.PASSED and t1.evaluation.status == Status.PASSED
    assert "inputs.ahead" not in t1.evaluation.phases_s


def test_a_worker_stalled_in_its_check_leaves_no_inputs_ahead_behind(tmp_path, solbench_cache, monkeypatch):
    """cand_stall_guards stops its own worker when the integrity check starts, here with two
    workloads: the first ends when the capped check gives up (guard_check_failed,
    REWARD_HACK) and its worker is replaced; the inputs made for the second during the wait,
    for that worker, are released, and the second makes its own on a new worker (where the
    candidate stalls again). Three pools in all, none left open."""
    p = relu_problem(tmp_path, SIZES[:2])
    made: list = []
    closed: list = []
    real_init, real_close = slots.SlotPool.__init__, slots.SlotPool.close

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        made.append(self)

    def close(self):
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(slots.SlotPool, "__init__", init)
    monkeypatch.setattr(slots.SlotPool, "close", close)
    cfg = _cfg(reference_timing=False).with_timeout(3)
    # the hostile's stall, on this problem's entry point
    src = (HERE / "cand_stall_guards.py").read_text().replace("def run(a, b):\n    return a @ b", RELU.split("\n\n", 1)[1])
    assert "torch.relu(x)" in src
    t0, t1 = evaluate(p, py_solution("stall_guards", src, "relu"), cfg)
    assert t0.evaluation.status == Status.REWARD_HACK, t0.evaluation.findings
    assert any(f.check == "guard_check_failed" for f in t0.evaluation.findings)
    assert t1.evaluation.status == Status.REWARD_HACK
    assert "inputs.ahead" not in t1.evaluation.phases_s
    assert len(made) == 3 and all(m in closed for m in made)


def test_a_worker_with_a_reply_unread_refuses_another_request(tmp_path, solbench_cache, monkeypatch):
    """``WorkerHandle.send_request`` while a sent request's reply is unread raises
    ProtocolError (the worker answers in order; a reply read under another request's number
    ends the worker), and the unread reply is still the one received."""
    p = relu_problem(tmp_path, SIZES[:1])
    sol = py_solution("honest", RELU, "relu")
    seen = []
    real = evaluator.guard_request

    def guard_request(run, when, full=True):
        pending = real(run, when, full)
        if when == "after timing":
            with pytest.raises(ProtocolError, match="is unread"):
                protocol.request(run.h, protocol.Ping(), timeout_s=5)
            seen.append(pending)
        return pending

    monkeypatch.setattr(evaluator, "guard_request", guard_request)
    (t,) = evaluate(p, sol, _cfg())
    assert seen and t.evaluation.status == Status.PASSED, t.evaluation.findings
