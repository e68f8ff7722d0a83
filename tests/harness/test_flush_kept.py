"""The cache-flush buffer is kept for all of a worker's workloads (harness/slots.py,
FlushBuffer), not made again per workload: one per worker, the reference's never one the
candidate's worker was sent, and a buffer a candidate wrote into never handed to anyone
else."""

from __future__ import annotations

from pathlib import Path

import torch

from solbench.harness import EvalConfig, Evaluator, process, slots
from solbench.spec import Status

from harness_helpers import py_solution, relu_problem

HERE = Path(__file__).resolve().parent


def _relu(tmp_path):
    return relu_problem(tmp_path, (1000, 2000, 3000))


HONEST = "import torch\n\ndef run(x):\n    return torch.relu(x)\n"


def _spy(monkeypatch):
    """(memfd ids sent per worker handle, FlushBuffers made)."""
    sent: dict[int, list[str]] = {}
    made: list[slots.FlushBuffer] = []
    orig_send = process.WorkerHandle._send_fds_bounded
    orig_init = slots.FlushBuffer.__init__

    def send(self, ids, *a, **kw):
        sent.setdefault(id(self), []).extend(ids)
        return orig_send(self, ids, *a, **kw)

    def init(self, *a, **kw):
        orig_init(self, *a, **kw)
        self.test_id = self.wire["path"][len("memfd:"):]
        made.append(self)

    monkeypatch.setattr(process.WorkerHandle, "_send_fds_bounded", send)
    monkeypatch.setattr(slots.FlushBuffer, "__init__", init)
    return sent, made


def _flush_id(buf: slots.FlushBuffer) -> str:
    return buf.test_id


def test_one_flush_buffer_per_worker_across_workloads_and_candidates(tmp_path, solbench_cache, monkeypatch):
    sent, made = _spy(monkeypatch)
    p = _relu(tmp_path)
    ev = Evaluator(p, EvalConfig(device="cpu", iters=4, rounds=2, seed=3))
    try:
        t1 = ev.evaluate(py_solution("a", HONEST, p.name))
        t2 = ev.evaluate(py_solution("b", HONEST, p.name))
    finally:
        ev.close()
    assert [t.evaluation.status for t in t1 + t2] == [Status.PASSED] * 6, \
        [(t.evaluation.status, t.evaluation.log[-300:]) for t in t1 + t2]
    assert all(t.evaluation.reference_timing is not None for t in t1 + t2)
    # candidate a, the reference (kept for b), candidate b: three buffers for six workloads
    assert len(made) == 3, len(made)
    assert len(sent) == 3  # three workers
    ids = [_flush_id(b) for b in made]
    owners = {i: [h for h, xs in sent.items() if i in xs] for i in ids}
    # each flush buffer went to exactly one worker, once (three workloads each)
    assert all(len(v) == 1 for v in owners.values()), owners
    assert all(sent[v[0]].count(i) == 1 for i, v in owners.items())
    # the sets of buffers the workers were sent are disjoint: the reference's never the candidates'
    sets = [set(v) for v in sent.values()]
    assert all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1:])
    assert all(b.tensor is None for b in made)  # all closed with their workers


def test_a_candidate_scribbling_its_flush_buffer_reaches_no_other_worker(tmp_path, solbench_cache, monkeypatch):
    sent, made = _spy(monkeypatch)
    p = _relu(tmp_path)
    src = (HERE / "cand_flush_scribble.py").read_text()
    ev = Evaluator(p, EvalConfig(device="cpu", iters=4, rounds=2, seed=3))
    try:
        ev.evaluate(py_solution("scribble", src, p.name))
        ref_buf = ev.flushes._by_role["reference"][1] if "reference" in ev.flushes._by_role else None
        ref_vals = set(ref_buf.tensor.unique().tolist()) if ref_buf is not None else set()
        t = ev.evaluate(py_solution("honest", HONEST, p.name))
    finally:
        ev.close()
    assert 0x5A5A5A5A not in ref_vals, ref_vals
    # the honest candidate after it: its own new buffer, never the scribbled one
    scribbled = made[0]
    assert [b for b in made if b is scribbled] == [scribbled]
    assert all(_flush_id(scribbled) not in xs for h, xs in list(sent.items())[1:])
    assert all(x.evaluation.status == Status.PASSED for x in t), [x.evaluation.findings for x in t]


def test_flush_buffers_one_per_worker_and_role(tmp_path):
    fb = slots.FlushBuffers()
    a, b = object(), object()
    try:
        x = fb.get("candidate", a, 4096, "cpu")
        assert fb.get("candidate", a, 4096, "cpu") is x  # kept for the same worker
        y = fb.get("candidate", b, 4096, "cpu")  # another worker: a new buffer, the old closed
        assert y is not x and x.tensor is None and y.tensor is not None
        r = fb.get("reference", a, 4096, "cpu")
        assert r is not y and r.wire["path"] != y.wire["path"]
        import pytest

        with pytest.raises(ValueError):
            fb.get("reference", b, 4096, "cpu")  # b holds the candidate's: never shared
        # a pool's twin refuses the pool's own (the candidate's) flush buffer
        p = _relu(tmp_path)
        w = p.workloads[0]
        from solbench.inputs import make_inputs

        pool = slots.SlotPool(p, w, 2, "cpu", make_inputs(p, w, 0, "cpu"))
        try:
            pool.use_flush(y)
            with pytest.raises(ValueError):
                pool.twin(flush=y)
            t = pool.twin(flush=r)
            assert t.flush_wire is r.wire
            t.close()
            assert r.tensor is not None  # the twin's close leaves the kept buffer open
        finally:
            pool.close()
        assert y.tensor is not None
    finally:
        fb.close()
    assert r.tensor is None and y.tensor is None


def test_flush_written_reads_random_words_of_the_whole_buffer():
    """``SlotPool.flush_written``: the positions it reads are spread over the whole buffer
    (over 100 calls of 64 positions into 1,000 words, both ends are reached: a draw
    confined to a part would miss them), and it names exactly those where the value is not
    the flush's: none on a fully written buffer, and on one whose upper half was skipped,
    only positions of that half (a call finds one there but with probability 2**-64)."""
    pool = object.__new__(slots.SlotPool)
    pool.flush = torch.full((1000,), 7, dtype=torch.int32)
    assert all(pool.flush_written(7) == [] for _ in range(20))
    pool.flush[500:] = 0
    seen: set[int] = set()
    for _ in range(100):
        bad = pool.flush_written(7)
        assert bad and all(500 <= p < 1000 for p in bad)
        seen.update(bad)
    assert min(seen) < 520 and max(seen) > 980
    pool.flush.fill_(0)
    allpos = {p for _ in range(100) for p in pool.flush_written(7)}
    assert min(allpos) < 20 and max(allpos) > 980 and all(0 <= p < 1000 for p in allpos)
