"""A failed verification of a timed iteration settled by asking for the same input set again
after the timed loop, untimed (harness/recheck.py, ``ask_again``): wrong there too is the
candidate's own error (``timed_output_wrong``, INCORRECT_NUMERICAL); right there is a candidate
that answers differently while timed (``timed_output_mismatch``, REWARD_HACK). End to end on
the CPU with real candidates on the corpus's gelu_f32 (3 upstream rounds + 2 stress rounds)."""
from pathlib import Path

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
    assert "asked again after the timed loop, untimed, on the same inputs: right" in f.message
    assert not any(x.check == "cached_output" for x in e.findings), e.findings
