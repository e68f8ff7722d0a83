"""Red team 28: the trusted reference's reused sets (``timed.REF_SET_USES``) are written into
its slot again before each of its timed calls, as the candidate's fresh sets are.

Why: on the CPU the flush is the parent's write of 2x the last-level cache, on the parent's
core. Where the last-level cache does not include the cores' private caches (AMD Zen's victim
L3, Intel since Skylake-SP: 1-2 MiB of L2 a core), that flush leaves the worker core's L2 as
it was; what took the worker's copies of the inputs out of it was the parent's write of the
next set into the slot (a write by another core invalidates them). With a set reused and only
its in-place inputs restored, a small workload's inputs (K slots of it within the worker
core's L2; K = 1 for one large enough to need it) are still there at the reference's next
call on the slot, and the candidate's are not: the two sides are no longer measured alike
(threats.md principle 8; the reference against itself reads above 1.00x, an honest
candidate's speedup reads low). Writing the pristine values back (the copy, the outputs'
poison and the sync the candidate's calls get) keeps the parity and still saves the input
generation that REF_SET_USES was for.
"""

from __future__ import annotations

from solbench.harness import EvalConfig, evaluate, protocol, slots as slots_mod, timed
from solbench.spec import load_problem
from solbench.spec.problem import reference_solution
from solbench.spec.trace import Status

from harness_helpers import write_problem

PLUS = {"name": "plus_one", "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "s": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x, s):\n    return x + s\n"}


def test_every_timed_call_of_either_side_gets_its_whole_set_written_first(tmp_path, monkeypatch):
    prob = load_problem(write_problem(tmp_path / "plus", PLUS, [
        {"uuid": "w0", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}, "s": {"type": "random"}}}]))
    blocks: list[timed.TimedBlocks] = []
    # (pool id, slot) -> names of the slot's tensor inputs the parent wrote since its last call
    written: dict[tuple[int, int], set[str]] = {}
    seen: dict[str, list[bool]] = {"C": [], "R": []}
    init, fill, restore, request = (timed.TimedBlocks.__init__, slots_mod.SlotPool.fill,
                                    slots_mod.SlotPool.restore, protocol.request)

    def spy_init(self, *a, **k):
        init(self, *a, **k)
        blocks.append(self)

    def spy_fill(self, i, values):
        written.setdefault((id(self), i), set()).update(self.names_in)
        return fill(self, i, values)

    def spy_restore(self, i, names):
        if self.pristine[i] is not None:
            written.setdefault((id(self), i), set()).update(names)
        return restore(self, i, names)

    def spy_request(h, req, *a, **k):
        tb = blocks[-1] if blocks else None
        if isinstance(req, protocol.TimeIter) and tb is not None:
            pool = tb.run.slots
            side = "R" if tb._ref_pool is not None and pool is tb._ref_pool else "C"
            seen[side].append(written.pop((id(pool), req.slot), set()) >= {"x", "s"})
        return request(h, req, *a, **k)

    monkeypatch.setattr(timed.TimedBlocks, "__init__", spy_init)
    monkeypatch.setattr(slots_mod.SlotPool, "fill", spy_fill)
    monkeypatch.setattr(slots_mod.SlotPool, "restore", spy_restore)
    monkeypatch.setattr(protocol, "request", spy_request)
    (t,) = evaluate(prob, reference_solution(prob), EvalConfig(device="cpu", rounds=1))
    ev = t.evaluation
    assert ev.status == Status.PASSED, ev.log
    assert seen["C"] and all(seen["C"]), seen["C"]
    assert len(seen["R"]) == ev.reference_timing.n_samples
    # each of the reference's timed calls found its slot's inputs written by the parent since
    # its previous call on the slot, as each of the candidate's did
    assert all(seen["R"]), f"{seen['R'].count(False)} of {len(seen['R'])} reference calls on a set left as it was"
