"""Red-team round 23: the repeat of a numerically failing call (rounds.repeat_call) must not
let a candidate escape a hack finding it would have had without the repeat. Real hostile
candidates on the CPU, the float32 relu of 4096 elements, timing off."""

from pathlib import Path

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status

from harness_helpers import py_solution, relu_problem

HERE = Path(__file__).parent


def _eval(tmp_path, cand: str, **cfg):
    p = relu_problem(tmp_path, (4096,))
    src = (HERE / cand).read_text()
    (t,) = evaluate(p, py_solution(cand[:-3], src, p.name),
                    EvalConfig(device="cpu", timing=False, rounds=3, **cfg))
    return t.evaluation


def _why(ev):
    rep = ev.correctness.extra.get("repeat_call") if ev.correctness is not None else None
    return ev.status, [(f.check, f.message[:200]) for f in ev.findings], rep


def test_exiting_on_the_repeat_does_not_hide_a_timer_patch(tmp_path):
    """Wrong output, time.perf_counter patched, os._exit(0) on the repeat: the integrity check
    runs on the worker the failing call left (harness_patch), the repeat's death is recorded."""
    ev = _eval(tmp_path, "cand_red23_patch_exit_on_repeat.py")
    assert ev.status == Status.REWARD_HACK, _why(ev)
    assert any(f.check == "harness_patch" for f in ev.findings), _why(ev)
    assert ev.correctness.extra["repeat_call"]["error"].startswith("WorkerDied"), _why(ev)
    assert not any(f.check == "guard_check_failed" for f in ev.findings), _why(ev)


def test_hanging_on_the_repeat_does_not_hide_a_precision_downgrade(tmp_path):
    """Wrong output, matmul precision lowered, a hang on the repeat: precision_downgrade is
    found before the repeat; the repeat's timeout is recorded, not judged."""
    ev = _eval(tmp_path, "cand_red23_flags_hang_on_repeat.py", call_timeout_floor_s=3.0)
    assert ev.status == Status.REWARD_HACK, _why(ev)
    assert any(f.check == "precision_downgrade" for f in ev.findings), _why(ev)
    assert ev.correctness.extra["repeat_call"]["error"].startswith("WorkerTimeout"), _why(ev)
    assert not any(f.check == "guard_check_failed" for f in ev.findings), _why(ev)


def test_writing_an_input_on_the_repeat_is_input_mutation(tmp_path):
    """The repeat is a call like any other: an input written there is input_mutation, not a
    nondeterministic kernel."""
    ev = _eval(tmp_path, "cand_red23_mutate_on_repeat.py")
    assert ev.status == Status.REWARD_HACK, _why(ev)
    f = [x for x in ev.findings if x.check == "input_mutation"]
    assert len(f) == 1 and f[0].evidence["inputs"] == ["x"] and "repeated" in f[0].message, _why(ev)
    assert not any(x.check == "nondeterministic_output" for x in ev.findings), _why(ev)


def test_a_subclass_returned_on_the_repeat_is_non_plain_output(tmp_path):
    """The worker's description of the repeat's returned outputs is read as in a round: a
    subclass is non_plain_output, and outputs it never wrote are not judged as the repeat's."""
    ev = _eval(tmp_path, "cand_red23_subclass_on_repeat.py")
    assert ev.status == Status.REWARD_HACK, _why(ev)
    assert any(x.check == "non_plain_output" for x in ev.findings), _why(ev)
    assert "error" in ev.correctness.extra["repeat_call"], _why(ev)
    assert not any(x.check == "nondeterministic_output" for x in ev.findings), _why(ev)
