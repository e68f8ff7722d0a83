"""Inputs the reference updates in place (a KV-cache write: ``cache[pos] = y; return y,
cache``): the parent learns which inputs the trusted reference writes by comparing them before
and after its call on round 0's values, the candidate may write those (and only those), and
their contents after the call are judged against the reference's like outputs
(docs/harness.md, "Inputs written in place")."""

from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, evaluate
from solbench.harness.rounds import Oracle
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import write_problem

HERE = Path(__file__).resolve().parent

INPLACE_REF = ("import torch\n@torch.no_grad()\ndef run(x, cache, pos):\n    y = x * 2.0\n"
               "    cache[pos] = y\n    return y, cache\n")
#: the same outputs without touching the inputs
OUTOFPLACE_REF = ("import torch\n@torch.no_grad()\ndef run(x, cache, pos):\n    y = x * 2.0\n"
                  "    c = cache.clone()\n    c[pos] = y\n    return y, c\n")


def _definition(reference: str, name: str) -> dict:
    return {
        "name": name,
        "axes": {"N": {"type": "var"}, "P": {"type": "const", "value": 512},
                 "D": {"type": "const", "value": 64}},
        "inputs": {"x": {"shape": ["N", "D"], "dtype": "float32"},
                   "cache": {"shape": ["P", "D"], "dtype": "float32"},
                   "pos": {"shape": ["N"], "dtype": "int64"}},
        "outputs": {"y": {"shape": ["N", "D"], "dtype": "float32"},
                    "cache_out": {"shape": ["P", "D"], "dtype": "float32"}},
        "input_roles": {"pos": "index:P"},
        "reference": reference,
    }


def _problem(tmp_path, reference=INPLACE_REF, name="inplace_cache_update"):
    return load_problem(write_problem(tmp_path / name, _definition(reference, name), [
        {"uuid": "w8", "axes": {"N": 8},
         "inputs": {"x": {"type": "random"}, "cache": {"type": "random"}, "pos": {"type": "random"}},
         "tolerance": {"max_atol": 1e-5, "max_rtol": 1e-5}}]))


def _eval(prob, cand: str, **kw):
    cfg = dict(device="cpu", iters=6, rounds=2, verify=6)
    cfg.update(kw)
    (t,) = evaluate(prob, load_solution(HERE / cand, prob), EvalConfig(**cfg))
    return t.evaluation


def _hacks(ev):
    return [f for f in ev.findings if f.severity == "hack"]


# ------------------------------------------------------------------ the trusted side
def test_oracle_observes_what_the_reference_writes_and_leaves_values_alone(tmp_path):
    prob = _problem(tmp_path)
    g = torch.Generator().manual_seed(0)
    values = {"x": torch.randn(8, 64, generator=g), "cache": torch.randn(512, 64, generator=g),
              "pos": torch.tensor([3, 0, 511, 7, 100, 42, 9, 64])}
    before = {k: v.clone() for k, v in values.items()}
    out, after = Oracle(prob, "cpu").run_observed(values)
    # the parent's copy is untouched, bit for bit
    assert all(torch.equal(values[k], before[k]) for k in values)
    assert Oracle.written_inputs(values, after) == ["cache"]
    # worked out by hand: rows pos hold 2x, every other row the old cache
    want = before["cache"].clone()
    want[before["pos"]] = 2.0 * before["x"]
    assert torch.equal(after["cache"], want) and torch.equal(out[1], want)
    assert Oracle.written_inputs(values, Oracle(_problem(tmp_path, OUTOFPLACE_REF, "oop"), "cpu")
                                 .run_observed(values)[1]) == []


# ------------------------------------------------------------------ honest: PASSED
@pytest.mark.parametrize("cand", ["cand_inplace_reference.py", "cand_inplace_index_copy.py"])
def test_honest_inplace_kernels_pass(tmp_path, solbench_cache, cand):
    ev = _eval(_problem(tmp_path), cand)
    assert ev.status == Status.PASSED, (ev.log, ev.findings)
    assert _hacks(ev) == []
    c = ev.correctness
    assert c.extra["inplace_inputs"] == ["cache"]
    # the in-place input was judged like an output, and matched exactly
    assert c.extra["outputs"]["input 'cache' (in place)"]["max_abs_error"] == 0.0


def test_non_idempotent_inplace_update_starts_from_fresh_values_every_call(tmp_path, solbench_cache):
    # acc += x is judged on every verified timed iteration: a call that found the previous
    # call's sum in acc would be off by x
    d = {"name": "accumulate", "axes": {"N": {"type": "var"}, "D": {"type": "const", "value": 64}},
         "inputs": {"acc": {"shape": ["N", "D"], "dtype": "float32"},
                    "x": {"shape": ["N", "D"], "dtype": "float32"}},
         "outputs": {"out": {"shape": ["N", "D"], "dtype": "float32"}},
         "reference": "import torch\ndef run(acc, x):\n    acc.add_(x)\n    return acc.clone()\n"}
    prob = load_problem(write_problem(tmp_path / "acc", d, [
        {"uuid": "w", "axes": {"N": 16}, "inputs": {"acc": {"type": "random"}, "x": {"type": "random"}}}]))
    ev = _eval(prob, "cand_inplace_accumulate.py")
    assert ev.status == Status.PASSED, (ev.log, ev.findings)
    assert ev.correctness.extra["inplace_inputs"] == ["acc"]
    assert not [f for f in ev.findings if f.severity != "advisory"]


# ------------------------------------------------------------------ wrong: INCORRECT
@pytest.mark.parametrize("cand", ["cand_inplace_skip.py", "cand_inplace_wrong_rows.py"])
def test_missing_or_misplaced_inplace_update_is_incorrect(tmp_path, solbench_cache, cand):
    ev = _eval(_problem(tmp_path), cand)
    assert ev.status == Status.INCORRECT_NUMERICAL, (ev.log, ev.findings)
    assert _hacks(ev) == []
    assert "input 'cache' (in place)" in ev.log
    figs = ev.correctness.extra["outputs"]
    # the returned outputs are right; only the cache the caller holds is wrong
    assert figs["y"]["max_abs_error"] == 0.0 and figs["cache_out"]["max_abs_error"] == 0.0
    assert figs["input 'cache' (in place)"]["max_abs_error"] > 0.0


def test_inplace_update_skipped_only_when_timed_is_caught(tmp_path, solbench_cache):
    ev = _eval(_problem(tmp_path), "cand_inplace_skip_when_timed.py")
    checks = [f.check for f in ev.findings if f.severity != "advisory"]
    assert "timed_output_mismatch" in checks, (ev.log, ev.findings)
    f = next(f for f in ev.findings if f.check == "timed_output_mismatch")
    assert f.evidence["output"] == "input 'cache' (in place)", f.message
    assert ev.status == Status.REWARD_HACK


# ------------------------------------------------------------------ hostile: REWARD_HACK
def test_writing_another_input_beside_the_inplace_one_is_a_hack(tmp_path, solbench_cache):
    ev = _eval(_problem(tmp_path), "cand_inplace_scribble.py")
    assert ev.status == Status.REWARD_HACK, (ev.log, ev.findings)
    fs = [f for f in _hacks(ev) if f.check == "input_mutation"]
    # one per correctness round; the cache it was allowed to write is never named
    assert fs and all(f.evidence["inputs"] == ["x"] and f.evidence["inplace_inputs"] == ["cache"]
                      for f in fs)


def test_writing_an_input_the_reference_leaves_alone_is_a_hack(tmp_path, solbench_cache):
    # the reference returns an updated copy: no input may be written, the cache included
    ev = _eval(_problem(tmp_path, OUTOFPLACE_REF, "outofplace_cache_update"), "cand_inplace_reference.py")
    assert ev.status == Status.REWARD_HACK, (ev.log, ev.findings)
    fs = [f for f in _hacks(ev) if f.check == "input_mutation"]
    assert fs and all(f.evidence["inputs"] == ["cache"] and f.evidence["inplace_inputs"] == [] for f in fs)


# ------------------------------------------------------------------ the parent's memory
def test_a_rounds_input_copies_and_outputs_are_freed_in_time(tmp_path, monkeypatch):
    """The parent holds one round's tensors at a time: when the next round's input set is
    made, every tensor of the last round's reference run (its outputs, its copies of the
    inputs) and the last input set are freed; and the reference's copies of the inputs it does
    not write (x, pos) are freed right after its call, before the candidate is judged (an 18.8
    GB workload held two rounds' worth, and ran the H200 out of memory in round 2). The
    written input (cache) is kept to be judged."""
    import weakref

    from solbench.harness import rounds

    prob = _problem(tmp_path)
    held: list[tuple[str, weakref.ref]] = []  # (what, tensor) of the last round
    alive_at_next_set: list[str] = []
    alive_at_judge: list[str] = []
    judged_cache = []
    real_make, real_run, real_judge = rounds.make_set, Oracle.run_observed, Oracle.judge

    def make_set(run, spec):
        alive_at_next_set.extend(w for w, r in held if r() is not None)
        held.clear()
        got = real_make(run, spec)
        if isinstance(got, dict):
            held.extend(("input set " + k, weakref.ref(v)) for k, v in got.items() if isinstance(v, torch.Tensor))
        return got

    def run_observed(self, values, keep=None):
        out, after = real_run(self, values, keep)
        held.extend(("output", weakref.ref(o)) for o in out)
        held.extend(("copy of " + k, weakref.ref(v)) for k, v in after.items())
        return out, after

    def judge(self, outs, ref_out, values, tol, slots, precision_check, **kw):
        alive_at_judge.extend(w for w, r in held if r() is not None and w in ("copy of x", "copy of pos"))
        judged_cache.append(any(w == "copy of cache" and r() is not None for w, r in held))
        return real_judge(self, outs, ref_out, values, tol, slots, precision_check, **kw)

    def run_rounds(*a, **kw):  # the correctness rounds only (not the checks after timing)
        monkeypatch.setattr(rounds, "make_set", make_set)
        monkeypatch.setattr(Oracle, "run_observed", run_observed)
        monkeypatch.setattr(Oracle, "judge", judge)
        try:
            return real_rounds(*a, **kw)
        finally:
            monkeypatch.setattr(rounds, "make_set", real_make)
            monkeypatch.setattr(Oracle, "run_observed", real_run)
            monkeypatch.setattr(Oracle, "judge", real_judge)

    from solbench.harness import evaluator

    real_rounds = evaluator.run_rounds
    monkeypatch.setattr(evaluator, "run_rounds", run_rounds)
    ev = _eval(prob, "cand_inplace_reference.py", rounds=4)
    assert ev.status == Status.PASSED
    assert len(judged_cache) >= 4 and all(judged_cache)
    assert alive_at_judge == [] and alive_at_next_set == []
