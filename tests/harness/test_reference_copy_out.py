"""The trusted reference's timed calls on CUDA leave their outputs where they are
(``protocol.TimeIter(copy_out=False)``): nothing reads them, and the sample (device time)
ends at the end marker. The candidate's timed calls copy out on every call, verified or
not, and on the CPU every call copies out (the flag is ignored there)."""

from __future__ import annotations

import pytest
import torch

from solbench.harness import EvalConfig, evaluate, protocol
from solbench.harness import worker as W
from solbench.harness.correctness import POISON_BYTE, poison_
from solbench.spec.problem import reference_solution
from solbench.spec.trace import Status

from harness_helpers import relu_problem


class _Conn:
    def send_bytes(self, *a):
        pass


def _worker_with_one_slot():
    w = W.Worker(_Conn(), "cpu")
    x = torch.randn(64)
    w.slots = [{"inputs": [x], "outputs": [poison_(torch.empty(64))]}]
    w.fn, w.dps = torch.relu, False
    return w, x


def _poisoned(t: torch.Tensor) -> bool:
    return bool((t.view(torch.uint8) == POISON_BYTE).all())


def test_the_copy_out_is_skipped_only_when_asked_and_never_on_the_cpu():
    w, x = _worker_with_one_slot()
    out = w.slots[0]["outputs"][0]
    meta = W.Worker._timed_iter(w, w.slots[0], {}, 0, flush=False, copy_out=False)
    assert _poisoned(out) and "returned" not in meta
    # through the request on the CPU: copied out all the same
    st, meta = w._on_time_iter(protocol.TimeIter(slot=0, i=1, flush=False, copy_out=False))
    assert st == "ok" and torch.equal(out, torch.relu(x)) and meta["returned"][0]["plain"]
    poison_(out)
    meta = W.Worker._timed_iter(w, w.slots[0], {}, 2, flush=False)  # the default
    assert torch.equal(out, torch.relu(x)) and meta["returned"][0]["shape"] == [64]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_only_the_references_timed_calls_skip_it(tmp_path, monkeypatch):
    prob = relu_problem(tmp_path, name="relu_co", uuid="w0")
    seen: dict[bool, list[bool]] = {}
    request = protocol.request

    def spy(h, req, *a, **k):
        if isinstance(req, protocol.TimeIter):
            seen.setdefault(req.check, []).append(req.copy_out)  # check: the candidate's calls
        return request(h, req, *a, **k)

    monkeypatch.setattr(protocol, "request", spy)
    (t,) = evaluate(prob, reference_solution(prob), EvalConfig(device="cuda"))
    assert t.evaluation.status == Status.PASSED, t.evaluation.log
    assert seen[True] and all(seen[True])
    assert seen[False] and not any(seen[False])
