"""Warm-up calls go without the stream-ordering evidence (protocol.Call ``ordering=False``:
no gate kernel, no shadow clone of the outputs on CUDA), since nothing reads it there: the
candidate's warm-up reply is read for interposition and processes only, the reference's not
at all. The correctness rounds, which judge ``stream_unordered``, keep it, and so do the
late re-check's judged calls."""

from __future__ import annotations

from solbench.harness import EvalConfig, evaluate, protocol, timed, workers
from solbench.spec.problem import reference_solution
from solbench.spec.trace import Status

from harness_helpers import relu_problem


def test_warm_up_calls_skip_the_ordering_evidence_and_judged_calls_keep_it(tmp_path, monkeypatch):
    prob = relu_problem(tmp_path, name="relu_wo", uuid="w0")
    where: list[str] = ["other"]
    seen: dict[str, list[bool]] = {}
    request = protocol.request

    def spy_request(h, req, *a, **k):
        if isinstance(req, protocol.Call):
            seen.setdefault(where[-1], []).append(req.ordering)
        return request(h, req, *a, **k)

    def inside(name, fn):
        def wrapped(*a, **k):
            where.append(name)
            try:
                return fn(*a, **k)
            finally:
                where.pop()
        return wrapped

    monkeypatch.setattr(protocol, "request", spy_request)
    monkeypatch.setattr(timed.TimedBlocks, "_warm_up", inside("cand_warmup", timed.TimedBlocks._warm_up))
    monkeypatch.setattr(timed.TimedBlocks, "_reference_timed",
                        inside("ref_warmup", timed.TimedBlocks._reference_timed))
    monkeypatch.setattr(workers.ReferenceWorkers, "_warm", inside("ref_prestart", workers.ReferenceWorkers._warm))
    cfg = EvalConfig(device="cpu", rounds=3)
    (t,) = evaluate(prob, reference_solution(prob), cfg)
    assert t.evaluation.status == Status.PASSED, t.evaluation.log
    # the candidate's warm-up calls, and the reference's before its blocks: none with it
    assert seen["cand_warmup"] == [False] * cfg.n_warmup()
    assert seen["ref_warmup"] and not any(seen["ref_warmup"])
    assert not any(seen.get("ref_prestart", []))
    # every other call (the correctness rounds, the re-checks after timing) keeps it
    assert len(seen["other"]) >= 3 and all(seen["other"])
