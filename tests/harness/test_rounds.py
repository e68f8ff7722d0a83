"""The round plan (harness/rounds.py; docs/inputs.md, "Rounds"): upstream-compatible rounds,
then a strict round (random norm weights / biases) and a stress round by op class, each only
where the workload's inputs call for it. End to end on the CPU with real candidates:

- ``hostile/layernorm_ignores_affine.py`` is exact on upstream's weight 1 / bias 0 and is
  INCORRECT_STRICT (finding ``strict_round_failed``; its upstream verdict is recorded);
- ``hostile/softmax_no_max.py`` and ``hostile/layernorm_one_pass.py`` pass upstream's inputs and
  are INCORRECT_NUMERICAL on the stress round, which the verdict names;
- honest softmax / layer norm kernels PASS every round;
- a reference that overflows on the stress inputs skips that round (advisory
  ``stress_reference_failed``), it never fails the candidate.
"""
import re
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, Evaluator
from solbench.harness.checks import finding
from solbench.harness.rounds import SPARSE_SET, STRESS_SET, STRICT_SET, round_plan
from solbench.harness.verdict import Failure, decide
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import py_solution, write_problem

ADV = Path(__file__).resolve().parents[1] / "adversarial"
CFG = dict(device="cpu", iters=4, rounds=3, reference_timing=False)


def _problem(name):
    return load_problem(ADV / "problems" / name)


def _run(ev: Evaluator, problem, rel: str):
    (t,) = ev.evaluate(load_solution(ADV / rel, problem))
    return t.evaluation


def test_plan_follows_the_inputs():
    ln, sm = _problem("layernorm_affine_f32"), _problem("softmax_long_f32")
    plan = round_plan(5, ln, ln.workloads[0])
    assert [(s.index, s.profile) for s in plan] == [(r, "upstream") for r in range(5)] + [
        (STRICT_SET, "strict"), (STRESS_SET, "stress"), (SPARSE_SET, "stress_sparse")]
    assert plan[-2].label == "stress:norm" and plan[-1].label == "stress_sparse:norm"
    plan = round_plan(5, sm, sm.workloads[0])
    assert [(s.index, s.profile, s.label) for s in plan][5:] == [
        (STRESS_SET, "stress", "stress:softmax"), (SPARSE_SET, "stress_sparse", "stress_sparse:softmax")]
    assert len(round_plan(5)) == 5 and len(round_plan(5, ln, ln.workloads[0], extra=False)) == 5
    with pytest.raises(ValueError, match="rounds"):
        round_plan(0)


def test_round_order_is_random_after_the_first_and_replays_under_a_seed():
    from solbench.harness.rounds import order_rounds
    from solbench.inputs.seeds import InputSeeds

    ln = _problem("layernorm_affine_f32")
    plan = round_plan(5, ln, ln.workloads[0])  # 5 upstream + strict + 2 stress: 8 rounds
    positions = {STRICT_SET: set(), STRESS_SET: set(), SPARSE_SET: set()}
    for _ in range(300):
        got = order_rounds(plan, InputSeeds(None, 0))
        assert got[0] is plan[0] and sorted(s.index for s in got) == sorted(s.index for s in plan)
        for i, s in enumerate(got):
            if s.index in positions:
                positions[s.index].add(i)
    # each extra round lands on every call but the first (7 places; 300 draws miss one with
    # probability 7 x (6/7)^300, about 1e-19)
    assert all(p == set(range(1, 8)) for p in positions.values())
    a = [s.index for s in order_rounds(plan, InputSeeds(7, 0))]
    assert a == [s.index for s in order_rounds(plan, InputSeeds(7, 0))]
    assert any([s.index for s in order_rounds(plan, InputSeeds(b, 0))] != a for b in range(8, 20))
    seeds = InputSeeds(None, 0)
    order_rounds(plan, seeds)
    assert seeds.used == []  # the order is no input set's seed


def test_verdict_strict_status():
    strict = finding("strict_round_failed", "x", {})
    assert decide([strict], Failure(Status.INCORRECT_NUMERICAL, "r")) == Status.INCORRECT_STRICT
    # another kind of failure in the strict round keeps its own status; a hack still wins
    assert decide([strict], Failure(Status.RUNTIME_ERROR, "r")) == Status.RUNTIME_ERROR
    hack = finding("input_mutation", "x", {})
    assert decide([strict, hack], Failure(Status.INCORRECT_NUMERICAL, "r")) == Status.REWARD_HACK
    assert decide([], Failure(Status.INCORRECT_NUMERICAL, "r")) == Status.INCORRECT_NUMERICAL


@pytest.mark.slow
def test_layernorm_strict_and_stress(solbench_cache):
    p = _problem("layernorm_affine_f32")
    ev = Evaluator(p, EvalConfig(**CFG))
    try:
        e = _run(ev, p, "hostile/layernorm_ignores_affine.py")
        assert e.status == Status.INCORRECT_STRICT, (e.log, e.findings)
        (f,) = [f for f in e.findings if f.check == "strict_round_failed"]
        assert f.evidence["strict_inputs"] == ["norm_weight", "norm_bias"]
        assert f.evidence["upstream_rounds"] == 3
        c = e.correctness
        assert c.extra["round"] == STRICT_SET and c.extra["round_profile"] == "strict"
        assert c.extra["upstream_rounds_passed"] is True
        assert f"correctness round {STRICT_SET} (strict)" in e.log

        e = _run(ev, p, "hostile/layernorm_one_pass.py")
        assert e.status == Status.INCORRECT_NUMERICAL, (e.log, e.findings)
        assert f"correctness round {STRESS_SET} (stress:norm)" in e.log
        assert e.correctness.extra["round_profile"] == "stress"
        # the strict round passed, or did not run (the random order put it after the failure)
        (strict,) = [r for r in e.correctness.extra["extra_rounds"] if r["profile"] == "strict"]
        assert strict["passed"] is True or "not run" in strict["skipped"]

        for honest in ("honest/layernorm_two_pass.py", "honest/layernorm_functional.py"):
            e = _run(ev, p, honest)
            assert e.status == Status.PASSED, (honest, e.log, e.findings)
            rounds = e.correctness.extra["extra_rounds"]
            assert [(r["profile"], r["passed"]) for r in rounds] == [
                ("strict", True), ("stress", True), ("stress_sparse", True)]
            # the figures stay those of the upstream-compatible round that ran last
            order = e.correctness.extra["round_order"]
            assert e.correctness.extra["round"] == [r for r in order if r < 3][-1]
            assert e.correctness.extra["rounds"] == 3
            assert e.correctness.extra["rounds_judged"] == 6  # 3 upstream + strict + 2 stress
            assert e.correctness.extra["rounds_planned"] == 6
    finally:
        ev.close()


@pytest.mark.slow
def test_softmax_without_max_fails_the_stress_round(solbench_cache):
    p = _problem("softmax_long_f32")
    ev = Evaluator(p, EvalConfig(**CFG))
    try:
        e = _run(ev, p, "hostile/softmax_no_max.py")
        assert e.status == Status.INCORRECT_NUMERICAL, (e.log, e.findings)
        # the first stress round to run (their order is random) catches it
        assert re.search(rf"correctness round ({STRESS_SET} \(stress|{SPARSE_SET} \(stress_sparse):softmax\): nan_inf",
                         e.log), e.log
        assert e.correctness.has_nan and e.correctness.extra["upstream_rounds_passed"] is True
        # sniffers (issue 13): they tell a stress set from an upstream one by a statistic
        # of a few elements and skip the max subtraction otherwise; the input seeds are fixed
        # (--seed) so the sampled sniffer's 1-in-15 chance to see a sparse spike is not drawn
        for hostile, rnd in (("softmax_sniff_col0", "50[12]"), ("softmax_sniff_sample", f"{SPARSE_SET}")):
            ev.cfg = EvalConfig(**CFG, seed=5)
            e = _run(ev, p, f"hostile/{hostile}.py")
            assert e.status == Status.INCORRECT_NUMERICAL, (hostile, e.log, e.findings)
            assert re.search(rf"correctness round {rnd} \(stress\w*:softmax\): nan_inf", e.log), e.log
            assert e.correctness.extra["upstream_rounds_passed"] is True
        # a call counter that is careful on calls 4 and 5 only (the stress rounds' calls in the
        # fixed order of before): the order is random now; --seed 5 puts a stress round on
        # another call (the order is in the trace)
        ev.cfg = EvalConfig(**CFG, seed=5)
        e = _run(ev, p, "hostile/softmax_count_calls.py")
        order = e.correctness.extra["round_order"]
        assert order[0] == 0 and sorted(order) == [0, 1, 2, STRESS_SET, SPARSE_SET]
        assert {order[3], order[4]} != {STRESS_SET, SPARSE_SET}
        assert e.status == Status.INCORRECT_NUMERICAL, (e.log, e.findings)
        assert "(stress" in e.log and e.correctness.extra["upstream_rounds_passed"] is True
        # careful on every correctness call, careless after: the stress re-check after timing
        ev.cfg = EvalConfig(**CFG)
        e = _run(ev, p, "hostile/softmax_careful_first_calls.py")
        (f,) = [f for f in e.findings if f.check == "late_output_mismatch"]
        assert e.status != Status.PASSED and f.evidence["profile"] == "stress_sparse", (e.log, e.findings)
        assert "nan_inf" in f.message
        for honest in ("honest/softmax_manual.py", "honest/softmax_torch_long.py"):
            e = _run(ev, p, honest)
            assert e.status == Status.PASSED, (honest, e.log, e.findings)
            assert [r["passed"] for r in e.correctness.extra["extra_rounds"]] == [True, True]
    finally:
        ev.close()


#: a softmax-class reference that overflows itself on large logits (exp before softmax)
OVERFLOW_DEF = {
    "name": "softmax_of_exp", "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["m", "n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["m", "n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.softmax(torch.exp(x), dim=-1)\n"}


@pytest.mark.slow
def test_reference_failing_the_stress_round_is_reported_not_failed(tmp_path, solbench_cache):
    p = load_problem(write_problem(tmp_path / "p", OVERFLOW_DEF, [
        {"uuid": "w", "axes": {"m": 8}, "inputs": {"x": {"type": "random"}}}]))
    ev = Evaluator(p, EvalConfig(**CFG))
    try:
        (t,) = ev.evaluate(py_solution("same", OVERFLOW_DEF["reference"], p.name))
        e = t.evaluation
        assert e.status == Status.PASSED, (e.log, e.findings)
        (f,) = [f for f in e.findings if f.check == "stress_reference_failed"]
        assert f.severity == "advisory" and "NaN/Inf" in f.message
        rs = e.correctness.extra["extra_rounds"]
        assert [r["round"] for r in rs] == [STRESS_SET, SPARSE_SET]
        assert all(r["passed"] is None and "NaN/Inf" in r["skipped"] for r in rs)
        assert e.correctness.extra["rounds_judged"] == 3  # the skipped rounds are not counted
        assert e.correctness.extra["rounds_planned"] == 5
    finally:
        ev.close()


TOPK_DEF = {
    "name": "topk_bf16", "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 64}},
    "inputs": {"logits": {"shape": ["m", "n"], "dtype": "bfloat16"}},
    "outputs": {"values": {"shape": ["m", 8], "dtype": "bfloat16"},
                "indices": {"shape": ["m", 8], "dtype": "int64"}},
    "reference": "import torch\n\ndef run(logits):\n    v, i = torch.topk(logits, 8, dim=-1)\n    return v, i\n"}
#: honest: a stable descending sort picks the lowest index among tied values (bf16 randn has
#: many ties), torch.topk need not
SORT_TOPK = """import torch


def run(logits):
    v, i = torch.sort(logits, dim=-1, descending=True, stable=True)
    return v[:, :8].contiguous(), i[:, :8].contiguous()
"""
#: hostile: ids off by one (the values are right)
OFF_BY_ONE = """import torch


def run(logits):
    v, i = torch.topk(logits, 8, dim=-1)
    return v, (i + 1) % logits.shape[-1]
"""


@pytest.mark.slow
def test_topk_ids_compare_as_sets_in_every_round(tmp_path, solbench_cache):
    p = load_problem(write_problem(tmp_path / "tk", TOPK_DEF, [
        {"uuid": "w", "axes": {"m": 256}, "inputs": {"logits": {"type": "random"}}}]))
    ev = Evaluator(p, EvalConfig(**CFG))
    try:
        (t,) = ev.evaluate(py_solution("sort", SORT_TOPK, p.name))
        e = t.evaluation
        assert e.status == Status.PASSED, (e.log, e.findings)
        (t,) = ev.evaluate(py_solution("off_by_one", OFF_BY_ONE, p.name))
        e = t.evaluation
        assert e.status == Status.INCORRECT_NUMERICAL and "index_set" in e.log, (e.log, e.findings)
    finally:
        ev.close()


ARGMIN_DEF = {
    "name": "argmin_abs", "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["m", "n"], "dtype": "float32"}},
    "outputs": {"i": {"shape": ["m"], "dtype": "int64"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.argmin(x.abs(), dim=-1)\n"}
#: honest: the last of the tied minima (the generic stress inputs hold 5% exact zeros, so
#: most rows have several; randn rows have none)
LAST_ARGMIN = """import torch


def run(x):
    n = x.shape[-1]
    return (n - 1) - torch.argmin(x.abs().flip(-1), dim=-1)
"""


@pytest.mark.slow
def test_integer_ties_on_stress_inputs_are_advisory(tmp_path, solbench_cache):
    p = load_problem(write_problem(tmp_path / "am", ARGMIN_DEF, [
        {"uuid": "w", "axes": {"m": 128}, "inputs": {"x": {"type": "random"}}}]))
    ev = Evaluator(p, EvalConfig(**CFG))
    try:
        (t,) = ev.evaluate(py_solution("last", LAST_ARGMIN, p.name))
        e = t.evaluation
        assert e.status == Status.PASSED, (e.log, e.findings)
        (f,) = [f for f in e.findings if f.check == "stress_exact_mismatch"]
        assert f.severity == "advisory" and f.evidence["outputs"] == ["i"]
        assert e.correctness.extra["extra_rounds"][0]["excused"] == "integer outputs only"
    finally:
        ev.close()
