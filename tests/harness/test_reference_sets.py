"""Every timed call of the trusted reference computes on a new input set, as the candidate's
do (harness/timed.py ``_timed_call``): the reference keeps no results, but its time can depend
on the values, and the paired-block rule takes agreeing blocks for independent evidence; a
set reused across calls is not (``bench/set_reuse_sim.py``). An in-place reference (a
non-idempotent update) is timed on its set's original values."""

from __future__ import annotations

from solbench.harness import EvalConfig, evaluate, protocol, timed
from solbench.harness.correctness import bits_equal
from solbench.spec import load_problem
from solbench.spec.problem import reference_solution
from solbench.spec.trace import Status

from harness_helpers import write_problem

# writes its input in place (x doubles at every call) and returns from it
INPLACE = {"name": "double_inplace", "axes": {"n": {"type": "var"}},
           "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
           "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
           "reference": "import torch\n\ndef run(x):\n    x.mul_(2.0)\n    return x + 1.0\n"}


def test_every_timed_call_of_the_reference_gets_a_new_set_as_the_candidates_do(tmp_path, monkeypatch):
    prob = load_problem(write_problem(tmp_path / "dbl", INPLACE, [
        {"uuid": "w0", "axes": {"n": 2048}, "inputs": {"x": {"type": "random"}}}]))
    blocks: list[timed.TimedBlocks] = []
    fresh_sides: list[str] = []
    ref_calls: list[bool] = []
    init, fresh, request = timed.TimedBlocks.__init__, timed.TimedBlocks.fresh, protocol.request

    def spy_init(self, *a, **k):
        init(self, *a, **k)
        blocks.append(self)

    def spy_fresh(self):
        fresh_sides.append("R" if self._ref_pool is not None and self.run.slots is self._ref_pool else "C")
        return fresh(self)

    uses: dict[int, list[int]] = {}
    held: list[dict] = []

    def spy_request(h, req, *a, **k):
        tb = blocks[-1] if blocks else None
        if isinstance(req, protocol.TimeIter) and tb is not None and tb._ref_pool is not None \
                and tb.run.slots is tb._ref_pool:
            pool = tb._ref_pool
            # what the reference is about to compute on is its slot's pristine set
            ref_calls.append(bits_equal(pool.slots[req.slot]["inputs"][0], pool.pristine[req.slot]["x"]))
            # how many timed calls each set served (the set object, by identity; kept alive
            # here so that no later set can get the same id)
            held.append(pool.pristine[req.slot])
            uses.setdefault(id(pool.pristine[req.slot]), []).append(req.slot)
        return request(h, req, *a, **k)

    monkeypatch.setattr(timed.TimedBlocks, "__init__", spy_init)
    monkeypatch.setattr(timed.TimedBlocks, "fresh", spy_fresh)
    monkeypatch.setattr(protocol, "request", spy_request)
    (t,) = evaluate(prob, reference_solution(prob), EvalConfig(device="cpu", rounds=1))
    ev = t.evaluation
    assert ev.status == Status.PASSED, ev.log
    assert ev.correctness.extra["inplace_inputs"] == ["x"]
    n_ref = ev.reference_timing.n_samples
    # every timed call of the reference was seen, each on its pool's pristine values
    assert len(ref_calls) == n_ref and all(ref_calls), (ref_calls, n_ref)
    # one new set for each of the reference's timed calls, none serving two of them
    assert fresh_sides.count("R") == n_ref
    assert len(uses) == n_ref and all(len(v) == 1 for v in uses.values())
    assert fresh_sides.count("C") >= ev.timing.n_samples
