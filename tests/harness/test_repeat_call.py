"""The call of a numerically failing upstream round is made once more on the same inputs
(rounds.repeat_call): the trace says whether the failure repeats bit for bit. Real candidates
on the CPU, a float32 relu of 4096 elements, timing off (the repeat belongs to the rounds)."""

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status

from harness_helpers import py_solution, relu_problem

# a kernel whose output carries fresh noise every call (what uninitialised memory or a
# racing reduction gives): wrong each time, differently
NOISY = "import torch\n\ndef run(x):\n    return torch.relu(x) + torch.randn_like(x) * 1e-2\n"
# wrong the same way every call
SCALED = "import torch\n\ndef run(x):\n    return torch.relu(x) * 1.5\n"
# wrong on its first call only: the repeat passes, the verdict stays the first call's
FIRST_WRONG = """import torch

_calls = [0]


def run(x):
    _calls[0] += 1
    y = torch.relu(x)
    return y * 1.5 if _calls[0] == 1 else y
"""


def _eval(tmp_path, name, src):
    p = relu_problem(tmp_path, (4096,))
    (t,) = evaluate(p, py_solution(name, src, p.name), EvalConfig(device="cpu", timing=False, rounds=3))
    return t.evaluation


def test_a_noisy_kernel_fails_and_its_repeat_differs(tmp_path):
    ev = _eval(tmp_path, "noisy", NOISY)
    assert ev.status == Status.INCORRECT_NUMERICAL
    rep = ev.correctness.extra["repeat_call"]
    assert rep["outputs"] == "different" and rep["passed"] is False and rep["matched_ratio"] < 0.99
    f = [x for x in ev.findings if x.check == "nondeterministic_output"]
    assert len(f) == 1 and f[0].severity == "advisory" and "which fail too" in f[0].message
    assert f[0].evidence["round"] == ev.correctness.extra["round"] == 0


def test_a_consistently_wrong_kernel_repeats_bit_for_bit(tmp_path):
    ev = _eval(tmp_path, "scaled", SCALED)
    assert ev.status == Status.INCORRECT_NUMERICAL
    assert ev.correctness.extra["repeat_call"] == {
        "outputs": "bit-identical", "passed": False, "matched_ratio": ev.correctness.extra["matched_ratio"]}
    assert not any(x.check == "nondeterministic_output" for x in ev.findings)


def test_a_repeat_that_passes_leaves_the_first_failure_as_the_verdict(tmp_path):
    ev = _eval(tmp_path, "first_wrong", FIRST_WRONG)
    assert ev.status == Status.INCORRECT_NUMERICAL and ev.correctness.extra["round"] == 0
    rep = ev.correctness.extra["repeat_call"]
    assert rep["outputs"] == "different" and rep["passed"] is True and rep["matched_ratio"] == 1.0
    f = next(x for x in ev.findings if x.check == "nondeterministic_output")
    assert "which pass" in f.message and "the first call's failure is the verdict" in f.message


# wrong on its first call, then hangs: the repeat does not return
HANGS_ON_REPEAT = """import time

import torch

_calls = [0]


def run(x):
    _calls[0] += 1
    if _calls[0] == 2:
        time.sleep(600)
    return torch.relu(x) * 1.5
"""


def test_a_repeat_that_hangs_is_recorded_and_the_verdict_stays(tmp_path):
    """The worker is stopped after the repeat's time limit; the verdict is the first call's
    (not TIMEOUT, and not REWARD_HACK for an integrity check a stopped worker cannot answer)."""
    from solbench.harness import EvalConfig

    p = relu_problem(tmp_path, (4096,))
    cfg = EvalConfig(device="cpu", timing=False, rounds=3, call_timeout_floor_s=3.0)
    (t,) = evaluate(p, py_solution("hangs", HANGS_ON_REPEAT, p.name), cfg)
    ev = t.evaluation
    assert ev.status == Status.INCORRECT_NUMERICAL, (ev.status, [(f.check, f.message) for f in ev.findings])
    assert ev.correctness.extra["repeat_call"]["error"].startswith("WorkerTimeout")
    assert not any(f.severity == "hack" for f in ev.findings)


def test_no_room_to_keep_the_first_outputs_skips_the_repeat():
    """An output the parent cannot copy (out of device memory on a workload near the limit)
    skips the repeat with a record, before anything is asked of the worker; the failure it
    would repeat stays the verdict (the evaluator's out-of-memory path, INVALID_REFERENCE,
    is not reached)."""
    from types import SimpleNamespace

    import torch

    from solbench.harness.rounds import repeat_call

    class Big:
        def clone(self):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 18.00 GiB")

    run = SimpleNamespace(h=SimpleNamespace(alive=True), findings=[], slots=None)
    rec = repeat_call(run, None, {}, [Big()], [], {}, "correctness round 0", 0)
    assert rec["error"].startswith("the first call's outputs could not be kept: OutOfMemoryError")
