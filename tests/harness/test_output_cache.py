"""Issue 30, item 8: an output cache keyed on the identity of the input tensors is REWARD_HACK
``cached_output`` with its evidence on every workload where it hits (harness/replay.py).

The correctness rounds hand new values in the same tensor objects (slot 0), the timed calls
reuse the K slots' objects, and the re-check after the timed loop reuses slot 0's: a cache
keyed on the objects hits there and returns an earlier answer."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem, py_solution

HERE = Path(__file__).resolve().parent
CFG = dict(device="cpu", iters=8, rounds=3, reference_timing=False)


def _cand(p, **replace):
    s = load_solution(HERE / "cand_identity_cache.py", p)
    src = s.sources[0].content
    for a, b in replace.items():
        assert a in src
        src = src.replace(a, b)
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


@pytest.mark.parametrize("mode, after", [("same", 0), ("clone", 0), ("same", 12), ("clone", 12)])
def test_identity_cache_is_a_cached_output_hack_on_every_workload(tmp_path, solbench_cache, mode, after):
    """Old code: INCORRECT_NUMERICAL (write_coverage 0% for "same", the returned tensor
    poisoned after its copy-out; constant_output for "clone") with ``after`` 0; with the cache
    used only past the correctness rounds (``after`` 12), REWARD_HACK timed_output_mismatch
    where a sampled iteration hit, else INCORRECT late_output_mismatch. Now every workload is
    REWARD_HACK with ``cached_output`` naming the call replayed."""
    p = matmul_problem(tmp_path, (64, 96, 128))
    traces = evaluate(p, _cand(p, **{'MODE = "same"': f'MODE = "{mode}"', "AFTER = 0": f"AFTER = {after}"}),
                      EvalConfig(**CFG))
    assert len(traces) == 3
    for t in traces:
        ev = t.evaluation
        f = [x for x in ev.findings if x.check == "cached_output"]
        assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
        assert f[0].evidence["kind"] in ("replayed", "unwritten") and f[0].evidence["earlier_call"]
        if after == 0:  # the second correctness round already hits
            assert "correctness round" in f[0].evidence["call"], f[0].evidence


WORKSPACE = '''import torch

_bufs = {}


def run(a, b):
    # one output buffer per input object, written by every call (a workspace, not a cache)
    out = _bufs.get(id(a))
    if out is None or out.shape != (a.shape[0], b.shape[1]):
        out = _bufs[id(a)] = torch.empty(a.shape[0], b.shape[1])
    torch.matmul(a, b, out=out)
    return out
'''


def test_a_workspace_kept_per_input_object_and_written_each_call_passes(tmp_path, solbench_cache):
    """Honest: the same output tensor returned for the same input objects, written by every
    call (the worker poisons it after each copy-out and the next call writes it again)."""
    p = matmul_problem(tmp_path, (64, 96))
    for t in evaluate(p, py_solution("ws", WORKSPACE, "mm"), EvalConfig(**CFG)):
        assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)
