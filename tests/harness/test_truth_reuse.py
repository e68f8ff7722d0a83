"""The fp64 truth of an input set is computed once per set and judged with (harness/rounds.py,
Oracle.truth): a stress round asks for it to see whether the reference holds on the set
(stress_reference_issue) and again to judge the candidate. The kept value must be what a
fresh computation gives, must not be poisoned by its readers or by a candidate's call, and
must never be handed out for another input set."""

from __future__ import annotations

from pathlib import Path

import torch

from solbench.harness import EvalConfig, Evaluator
from solbench.harness.rounds import Oracle
from solbench.inputs import make_inputs
from solbench.spec import Status, load_problem

from harness_helpers import py_solution

ADV = Path(__file__).resolve().parents[1] / "adversarial"


def _softmax():
    return load_problem(ADV / "problems" / "softmax_long_f32")


def _count_runs(monkeypatch, oracle: Oracle) -> list[int]:
    n = [0]
    real = oracle._truth_run

    def counted(values):
        n[0] += 1
        return real(values)

    monkeypatch.setattr(oracle, "_truth_run", counted)
    return n


def test_stress_set_truth_is_computed_once_and_equals_a_fresh_one(monkeypatch):
    p = _softmax()
    w = p.workloads[0]
    values = make_inputs(p, w, 11, "cpu", profile="stress")
    oracle = Oracle(p, "cpu")
    runs = _count_runs(monkeypatch, oracle)
    ref_out = oracle.run(values)
    tol = w.tolerance_or_default()
    assert oracle.stress_reference_issue(ref_out, values, tol) is None
    kept = [t.clone() for t in oracle.truth(values)]
    assert runs[0] == 1  # the second ask was served from the kept run
    # its readers (the reference's own check above, the candidate's judge below) wrote nothing
    fresh = Oracle(p, "cpu").truth(values)
    assert len(fresh) == len(kept) and all(torch.equal(a, b) for a, b in zip(kept, fresh))
    # by hand: softmax in float64 of the float64 inputs
    x = values[next(iter(p.definition.inputs))].double()
    assert torch.allclose(kept[0], torch.softmax(x, dim=-1), rtol=0, atol=1e-15)


def test_another_input_set_never_gets_the_kept_truth(monkeypatch):
    p = _softmax()
    w = p.workloads[0]
    oracle = Oracle(p, "cpu")
    runs = _count_runs(monkeypatch, oracle)
    a = make_inputs(p, w, 1, "cpu")
    ta = oracle.truth(a)
    # equal contents in another dict: recomputed (the key is the set itself, not its values)
    a2 = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in a.items()}
    oracle.truth(a2)
    b = make_inputs(p, w, 2, "cpu")
    tb = oracle.truth(b)
    assert runs[0] == 3
    assert not torch.equal(ta[0], tb[0])
    assert torch.equal(tb[0], Oracle(p, "cpu").truth(b)[0])


def test_judge_drops_the_kept_truth():
    p = _softmax()
    w = p.workloads[0]
    oracle = Oracle(p, "cpu")
    v = make_inputs(p, w, 3, "cpu")
    ref = oracle.run(v)
    oracle.truth(v)
    assert oracle._truth_memo is not None

    class _Slots:  # what judge reads of the slot pool
        out_specs = [(tuple(ref[0].shape), ref[0].dtype)]
        names_out = list(p.definition.outputs)

    rep, _ = oracle.judge([r.clone() for r in ref], ref, v, w.tolerance_or_default(), _Slots(), True)
    assert rep.passed and oracle._truth_memo is None


CAND_SCRIBBLE = '''
import torch

def run(x):
    out = torch.softmax(x, dim=-1)
    x.fill_(1e4)   # writes its input buffer: the parent's pristine set and its truth stay as they were
    return out
'''


def test_a_candidate_writing_its_inputs_does_not_reach_the_truth(solbench_cache):
    """A candidate that overwrites its input slot after computing: input_mutation as before,
    and every truth the rounds judged with was the parent's own (the upstream rounds pass on
    the outputs, the kept truth is never the scribbled values')."""
    p = _softmax()
    ev = Evaluator(p, EvalConfig(device="cpu", rounds=2, timing=False, max_workloads=1, seed=5))
    seen = []
    real = ev.oracle._truth_run

    def spy(values):
        got = real(values)
        seen.append((values, [t.clone() for t in got[0]] if got else None))
        return got

    ev.oracle._truth_run = spy
    try:
        (t,) = ev.evaluate(py_solution("scribble", CAND_SCRIBBLE, p.name))
    finally:
        ev.close()
    e = t.evaluation
    assert any(f.check == "input_mutation" for f in e.findings), (e.status, e.findings)
    assert seen
    for values, truth in seen:
        x = values[next(iter(p.definition.inputs))]
        assert not bool((x == 1e4).all())  # the parent's set, never the candidate's scribble
        assert torch.equal(truth[0], Oracle(p, "cpu").truth(values)[0])


def test_kept_truth_holds_only_the_inputs_the_reference_wrote(tmp_path):
    """The float64 copies of inputs the reference only read are dropped after its run (on
    the largest workloads they doubled the parent's device memory); the one it updated in
    place is kept, as it left it: by hand, acc + 2 * x in float64."""
    from harness_helpers import write_problem

    p = load_problem(write_problem(tmp_path / "acc", {
        "name": "acc", "axes": {"n": {"type": "var"}},
        "inputs": {"acc": {"shape": ["n"], "dtype": "float32"}, "x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(acc, x):\n    acc.add_(2 * x)\n    return acc * 1.0\n",
    }, [{"uuid": "w0", "axes": {"n": 64}, "inputs": {"acc": {"type": "random"}, "x": {"type": "random"}}}]))
    v = make_inputs(p, p.workloads[0], 5, "cpu")
    oracle = Oracle(p, "cpu")
    out = oracle.truth(v, ["acc"])
    _, kept = oracle._truth_memo[1]
    assert set(kept) == {"acc"}
    want = v["acc"].double() + 2 * v["x"].double()
    assert torch.equal(out[0], want) and torch.equal(out[1], want)
    # asking for an input it did not write: no truth, never a stale copy
    assert oracle.truth(v, ["x"]) is None
