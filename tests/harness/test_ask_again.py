"""A failed verification of a timed iteration settled by asking for the same input set again
after the timed loop, untimed (harness/recheck.py, ``ask_again``): wrong there too is the
candidate's own error (``timed_output_wrong``, INCORRECT_NUMERICAL); right there is a candidate
that answers differently while timed (``timed_output_mismatch``, REWARD_HACK). End to end on
the CPU with real candidates on the corpus's gelu_f32 (3 upstream rounds + 2 stress rounds).
And the honest output whose bytes are not its values (a negative-bit view), which the CPU timed
calls' copy-out read raw: wrong while timed, right asked again, a false hack before."""
from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status, load_problem, load_solution

HERE = Path(__file__).resolve().parent
CFG = EvalConfig(device="cpu", iters=4, rounds=3, reference_timing=False)


def _eval(cand: str):
    p = load_problem(HERE.parent / "adversarial" / "problems" / "gelu_f32")
    (t,) = evaluate(p, load_solution(HERE / cand, p), CFG)
    return t.evaluation


def test_wrong_whenever_asked_is_incorrect_not_a_hack(solbench_cache):
    e = _eval("cand_wrong_after_calls.py")
    # every correctness round ran on the right calls (CALLS_RIGHT of them)
    assert e.correctness.extra["rounds_judged"] == 5, e.correctness.extra
    checks = {f.check: f for f in e.findings}
    assert e.status == Status.INCORRECT_NUMERICAL, (e.log, e.findings)
    assert "timed_output_mismatch" not in checks and "timed_output_wrong" in checks
    f = checks["timed_output_wrong"]
    assert f.severity == "fail" and f.evidence["failed_check"] == "tolerance"
    # 10% too large everywhere: the relative L2 error is 0.1, timed and asked again
    assert abs(f.evidence["rel_l2"] - 0.1) < 1e-3 and abs(f.evidence["asked_again"]["rel_l2"] - 0.1) < 1e-3


def test_right_when_asked_again_stays_a_hack(solbench_cache):
    e = _eval("cand_timed_cheap_gelu.py")
    assert e.status == Status.REWARD_HACK, (e.log, e.findings)
    (f,) = [f for f in e.findings if f.check == "timed_output_mismatch"]
    assert f.severity == "hack" and f.evidence["asked_again"] == "right", f
    assert "asked again after the timed loop, untimed, on the same inputs: right (" in f.message
    assert not any(x.check == "cached_output" for x in e.findings), e.findings


def test_an_output_with_the_negative_bit_is_read_as_its_values(solbench_cache):
    """An honest non-DPS output whose bytes are not its values (the negative bit) was read raw
    by the parent's copy-out of the CPU timed calls: every timed output -y, right when asked
    again untimed (the worker's copy through torch), REWARD_HACK. The worker now copies such
    an output itself, inside the call's window."""
    from solbench.harness.guards import lazy_bits

    y = torch.randn(4, 3)
    v = torch.complex(torch.zeros_like(y), -y).conj().imag
    assert v.is_neg() and torch.equal(v, y) and lazy_bits(v) and not lazy_bits(y)
    assert lazy_bits(torch.complex(y, y).conj()) and lazy_bits(torch._efficientzerotensor(3))
    e = _eval("cand_neg_view_output.py")
    assert e.status == Status.PASSED, (e.log, e.findings)


def test_a_cheat_repeating_its_wrong_answer_still_fails(solbench_cache):
    """Red team: a ReLU while timed that remembers the values it so answered and answers them
    wrong again when asked untimed. The repeat cannot tell it from an honest error (the
    documented limit: INCORRECT, not REWARD_HACK); it fails either way, and a fresh set
    untimed (the late re-check, a few signs flipped) is answered right."""
    e = _eval("cand_red31_repeat_wrong.py")
    assert e.status == Status.INCORRECT_NUMERICAL, (e.log, e.findings)
    assert {f.check for f in e.findings if f.severity == "fail"} == {"timed_output_wrong"}, e.findings


@pytest.mark.slow
def test_a_repeat_that_never_returns_keeps_the_hack(solbench_cache):
    """Red team: a cheat that sleeps forever when asked again: the call limit ends the repeat
    and the hack finding made before it decides."""
    import time

    t0 = time.monotonic()
    e = _eval("cand_red31_repeat_hang.py")
    assert e.status == Status.REWARD_HACK, (e.log, e.findings)
    assert any(f.check == "timed_output_mismatch" for f in e.findings)
    assert time.monotonic() - t0 < 120
