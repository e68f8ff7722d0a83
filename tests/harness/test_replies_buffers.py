"""Issue 11, replies and buffers (threats.md principle 7): the worker's replies are data,
where they come from is checked by the parent, and the trusted reference never computes in
buffers the candidate's worker mapped.

Every hostile here is a real candidate evaluated end to end on the CPU; each test states
what the code before this change did with it (measured with the same candidate).
"""

import math
import random
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from solbench.harness import EvalConfig, evaluate, process, protocol
from solbench.harness.evidence import returned_issue
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import matmul_problem, py_solution, write_problem

HERE = Path(__file__).resolve().parent


def _mm(tmp_path, n=256):
    return matmul_problem(tmp_path, (n,))


def _topk(tmp_path):
    return load_problem(write_problem(tmp_path / "topk", {
        "name": "topk", "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"v": {"shape": [64], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x):\n    return torch.topk(x, 64).values\n",
    }, [{"uuid": "w", "axes": {"n": 1 << 16}, "inputs": {"x": {"type": "random"}}}]))


def _cand(p, name, **replace):
    s = load_solution(HERE / name, p)
    src = s.sources[0].content
    for a, b in replace.items():
        assert a in src, a
        src = src.replace(a, b)
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


def _checks(ev, severity=None):
    return {f.check for f in ev.findings if severity is None or f.severity == severity}


# ------------------------------------------------------------------ 1. the reply channel
def test_a_proxy_dup2ed_over_the_reply_fd_is_reward_hack(tmp_path, solbench_cache):
    """Before: PASSED (a frozen worker clock, its snapshot's finding emptied in transit, each
    timed reply's time rewritten to the proxy's own clock). The parent reads the worker's fds
    from /proc after every reply: fd N is not the socket it handed the worker."""
    p = _mm(tmp_path)
    (t,) = evaluate(p, _cand(p, "cand_reply_mitm.py"), EvalConfig(device="cpu", iters=6, rounds=2))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings, ev.log[-400:])
    f = next(x for x in ev.findings if x.check == "reply_channel_tampered")
    assert f.severity == "hack" and f.evidence["during"] == "build"  # seen at the first reply
    problems = " ".join(f.evidence["problems"])
    assert "reply fd" in problems and "second reference" in problems, problems
    # the proxy's two threads were started at import, after the parent's baseline
    assert len(f.evidence["threads_since_hello"]) >= 2, f.evidence


def test_a_stalling_proxy_ends_within_the_call_limit(tmp_path, solbench_cache):
    """The proxy stops answering after the correctness rounds. Before: the integrity check
    waited its own 60 s whatever --timeout said (66 s for this run with --timeout 3)."""
    p = _mm(tmp_path)
    cfg = EvalConfig(device="cpu", iters=6, rounds=2)
    cfg = cfg.with_timeout(3)
    t0 = time.monotonic()
    (t,) = evaluate(p, _cand(p, "cand_reply_mitm.py", **{'MODE = "hide"': 'MODE = "stall"'}), cfg)
    assert time.monotonic() - t0 < 45
    assert t.evaluation.status == Status.REWARD_HACK, (t.evaluation.status, t.evaluation.findings)
    assert "reply_channel_tampered" in _checks(t.evaluation, "hack")


def test_forged_replies_and_a_worker_that_stops_reading_end_in_a_status(tmp_path, solbench_cache):
    """Forged timed replies written onto the real reply socket by a thread while the worker
    never reads again: the parent's requests pile up unread. Before: the parent's blocking
    send stopped for good after about 220 requests (killed after 200 s, no trace). Now each
    send has a deadline within the call's limit."""
    p = _mm(tmp_path)
    cfg = EvalConfig(device="cpu", iters=400, rounds=2, reference_timing=False)
    cfg = cfg.with_timeout(3)
    t0 = time.monotonic()
    (t,) = evaluate(p, _cand(p, "cand_reply_forger.py"), cfg)
    ev = t.evaluation
    assert time.monotonic() - t0 < 120
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings, ev.log[-300:])
    assert "stopped reading requests" in ev.log
    # (on the CPU the parent writes the flush itself, so no flush of the worker's is missed:
    # flush_skipped is CUDA's there)
    assert "timed_output_mismatch" in _checks(ev, "hack")
    # the fd is the parent's own socket: no tampering is claimed where there was none
    assert "reply_channel_tampered" not in _checks(ev)


def test_a_worker_stalled_in_its_integrity_check_ends_within_the_call_limit(tmp_path, solbench_cache):
    """cand_stall_guards stops its own process when the integrity check starts. Before: the
    check waited its own 60 s under --timeout 3; now the harness's own ops are capped at
    max(--timeout, 10 s)."""
    p = _mm(tmp_path, n=64)
    cfg = EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False)
    cfg = cfg.with_timeout(3)
    t0 = time.monotonic()
    (t,) = evaluate(p, _cand(p, "cand_stall_guards.py"), cfg)
    took = time.monotonic() - t0
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
    f = next(x for x in ev.findings if x.check == "guard_check_failed")
    assert "no answer within 10 s during guards" in f.message, f.message
    assert took < process.HARNESS_OP_FLOOR_S + 30, took


def test_honest_worker_channels_are_intact(tmp_path, solbench_cache):
    """The check itself: an honest evaluation's worker holds exactly the parent's sockets."""
    p = _mm(tmp_path)
    honest = py_solution("mm_honest", "import torch\n\ndef run(a, b):\n    return a @ b\n", "mm")
    (t,) = evaluate(p, honest, EvalConfig(device="cpu", iters=6, rounds=2))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.findings, t.evaluation.log[-300:])
    assert not _checks(t.evaluation) & {"reply_channel_tampered", "reply_contradiction", "malformed_reply"}


# ------------------------------------------------------------------ 2. the reference's buffers
def _record_memfds(monkeypatch):
    """memfd ids the parent sends to each worker, by handle (the test's view of the wire)."""
    sent: dict[int, set[str]] = {}
    orig = process.WorkerHandle._send_fds_bounded

    def spy(self, ids, *a, **kw):
        sent.setdefault(id(self), set()).update(ids)
        return orig(self, ids, *a, **kw)

    monkeypatch.setattr(process.WorkerHandle, "_send_fds_bounded", spy)
    return sent


@pytest.mark.parametrize("stop", ["pid", "group_only"])
def test_the_reference_never_reads_buffers_the_candidate_mapped(tmp_path, solbench_cache, monkeypatch, stop):
    """cand_ref_steer leaves its process group (a group stop misses it) and rewrites the
    inputs it keeps mapped, with ascending values, while the reference is timed. Before:
    PASSED, the reference timed on those inputs (12.7 ms vs 0.56 ms for the same
    torch.topk; 2.9x speedup for the reference's own kernel on a loaded host), because the
    reference worker was handed the candidate's memfds. Now the worker is stopped by pid too,
    and (``group_only``: with the stop as weak as before, as SIGSTOP is for GPU work) the
    reference computes in buffers of its own that the candidate was never sent."""
    if stop == "group_only":
        import os
        import signal

        monkeypatch.setattr(process.WorkerHandle, "pause",
                            lambda self: os.killpg(self.pgid, signal.SIGSTOP))
    sent = _record_memfds(monkeypatch)
    p = _topk(tmp_path)
    (t,) = evaluate(p, _cand(p, "cand_ref_steer.py"), EvalConfig(device="cpu", iters=20, rounds=2))
    ev = t.evaluation
    assert ev.reference_timing is not None, (ev.status, ev.findings, ev.log[-300:])
    assert len(sent) == 2, sent  # the candidate's worker and the reference's
    cand, ref = sent.values()
    assert cand and ref and not (cand & ref), (cand, ref)
    # its own calls are an honest topk on intact inputs. Its writer arms on any 30 ms pause of
    # the parent's calls; on a loaded host such a pause also falls inside its own timing, and
    # the writer then rewrites inputs while the candidate's worker runs: the re-check catches
    # that as input_mutation (a true catch of this candidate, and the only one allowed)
    hacks = _checks(ev, "hack")
    if ev.status == Status.REWARD_HACK:
        # or its writer armed on a pause of its own timed block (a gap between two of its
        # calls, held stopped, seen once the next call's window resumed it) and, writing from a second thread, started an OpenMP
        # team that outlived the next call: also a true catch (background_thread); inputs
        # rewritten while one of its verified timed calls ran make that call's outputs wrong
        # (timed_output_mismatch), a true catch too
        assert hacks and hacks <= {"input_mutation", "background_thread", "timed_output_mismatch"}, \
            (ev.status, ev.findings)
    else:
        assert ev.status == Status.PASSED and not hacks, (ev.status, ev.findings)


def test_many_buffers_cross_in_few_messages_without_blocking(monkeypatch):
    """600 buffers of one load: one message per buffer filled the socket's queue after about
    270 (the parent blocked before the worker read any); in batches they all cross and the
    worker side maps each id to its own memfd."""
    import os
    import socket

    from solbench.harness import shm

    arena = shm.ShmArena()
    parent, worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        descs = []
        for i in range(600):
            t, d = arena.tensor((2,), None, torch.int32)
            t.fill_(i)
            descs.append(d)
        ids = shm.memfd_ids({"slots": descs})
        parent.setblocking(False)  # a send that would block raises here
        shm.send_memfds(parent, ids)
        monkeypatch.setattr(shm, "FD_CHANNEL", worker)
        monkeypatch.setattr(shm, "_RECEIVED", {})
        assert sorted(ids) == sorted(d["path"][6:] for d in descs)
        for i, d in enumerate(descs):
            buf_id = d["path"][6:]
            fd = shm._received_fd(buf_id)
            assert os.fstat(fd).st_ino == os.fstat(shm.MEMFDS[buf_id]).st_ino
            raw = torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=8, dtype=torch.uint8)
            assert raw.view(torch.int32).tolist() == [i, i]  # the same buffer, not a copy
        for fd in shm._RECEIVED.values():
            os.close(fd)
    finally:
        arena.close()
        parent.close()
        worker.close()


# ------------------------------------------------------------------ 3. malformed replies
_VALID = {
    "ping": {"pid": 5}, "warm_profiler": {"ms": 1.0},
    "build": {"languages": ["pytorch"], "language": None, "entry_kind": "function", "module_path": None},
    "load": {}, "exit": {},
    "call": {"returned": [{"type": "torch.Tensor", "plain": True, "shape": [4, 4], "dtype": "float32",
                           "device": "cpu"}], "count_mismatch": False, "interposition": []},
    "noop": {"host_ms": 0.1, "interposition": []},
    "time_begin": {"cupti": False, "reason": None},
    "time_iter": {"host_ms": 0.2, "event_ms": None, "returned": None, "interposition": []},
    "time_end": {"cupti": False, "span_ms": [0.1], "kernel_sum_ms": [0.1], "n_activities": [1],
                 "kernel_sets": [["k"]], "late_ms": None},
    "guards": {"changed": [], "interposition": [], "flags": {"tf32": False}, "flags0": {"tf32": False}},
}
_JUNK = [None, True, 0, -1, 2**70, 1e400, -1e400, math.nan, 0.5, "", "x" * 30_000, "1.0", [], [None],
         [1.0] * 300, {}, {"a": [1]}, [[[[]]]], {"plain": True}]


def test_fuzzed_replies_are_refused_or_safe_for_the_parent():
    """Random field rewrites of a valid reply of every op (fixed seed, 4,000 cases): the
    boundary either refuses it with ReplyInvalid or returns a model whose times are finite
    and non-negative, and whose returned outputs the parent's shape/dtype judge reads
    without an exception (before: a plain output with shape None passed the model and raised
    TypeError in the parent, out of evaluate())."""
    rng = random.Random(11)
    stub = SimpleNamespace(slots=SimpleNamespace(names_out=["c"], out_specs=[((4, 4), torch.float32)]),
                           findings=[], cfg=SimpleNamespace(device="cpu"))
    accepted = 0
    ops = sorted(_VALID)
    for _ in range(4000):
        # half the cases on the replies whose outputs the parent judges
        op = rng.choice(["call", "time_iter"]) if rng.random() < 0.5 else rng.choice(ops)
        payload = {k: v for k, v in _VALID[op].items()}
        if op in ("call", "time_iter") and rng.random() < 0.5:  # one field of an output record
            rec = dict(_VALID["call"]["returned"][0])
            rec[rng.choice(list(rec) + ["extra"])] = rng.choice(_JUNK)
            payload["returned"] = [rec]
        else:
            for _ in range(rng.randint(1, 3)):
                k = rng.choice(list(payload) + ["extra"])
                if k in payload and rng.random() < 0.15:
                    del payload[k]
                else:
                    payload[k] = rng.choice(_JUNK)
        status = rng.choice(["ok"] * 8 + ["error", "compile_error", "weird"])
        try:
            rep = protocol.parse_reply(op, status, payload)
        except protocol.ReplyInvalid as e:
            assert e.op == op and e.reason
            continue
        accepted += 1
        for name in ("ms", "host_ms", "event_ms"):
            x = getattr(rep, name, None)
            assert x is None or (math.isfinite(x) and x >= 0), (op, payload)
        for xs in (getattr(rep, n, None) for n in ("span_ms", "kernel_sum_ms", "late_ms")):
            assert xs is None or all(math.isfinite(x) and x >= 0 for x in xs)
        if isinstance(rep, (protocol.CallReply, protocol.TimeIterReply)):
            returned_issue(stub, rep)  # must not raise
    assert 100 < accepted < 4000  # both sides of the boundary were exercised


CASES = [
    # (op, field, value, status, check that must be there); before: see each comment
    ("call", "payload.returned.0.shape", "None", Status.RUNTIME_ERROR, "malformed_reply"),  # TypeError out of evaluate()
    ("call", "payload.returned", "'x'", Status.RUNTIME_ERROR, "malformed_reply"),
    ("call", "payload.returned", "DELETE", Status.RUNTIME_ERROR, "malformed_reply"),
    ("call", "payload.surprise", "1", Status.RUNTIME_ERROR, "malformed_reply"),
    ("call", "payload", "DEEP", Status.RUNTIME_ERROR, None),  # reader thread died: TIMEOUT at the call limit
    ("call", "status", "'weird'", Status.RUNTIME_ERROR, "malformed_reply"),
    ("call", "seq", "10**6", Status.RUNTIME_ERROR, None),
    ("time_iter", "payload.host_ms", "1e300", Status.RUNTIME_ERROR, "malformed_reply"),
    ("time_iter", "payload.host_ms", "5000.0", Status.REWARD_HACK, "reported_time_contradiction"),
    ("time_iter", "payload.event_ms", "0.001", Status.REWARD_HACK, "reply_contradiction"),  # PASSED
    ("time_begin", "payload.cupti", "True", Status.REWARD_HACK, "reply_contradiction"),  # PASSED
    ("time_end", "payload.cupti", "1", Status.RUNTIME_ERROR, "malformed_reply"),
    ("noop", "payload.host_ms", "'fast'", Status.RUNTIME_ERROR, "malformed_reply"),
    ("guards", "payload.changed", "5", Status.REWARD_HACK, "guard_reply_invalid"),
    # PASSED, a 100 kB flag name (a 1 MB value) copied into an advisory finding and the trace
    ("guards", "payload.flags", "{'x' * 100000: 1}", Status.REWARD_HACK, "guard_reply_invalid"),
    ("guards", "payload.flags", "{'float32_matmul_precision': 'z' * 1000000}", Status.REWARD_HACK,
     "guard_reply_invalid"),
    ("build", "payload.entry_kind", "'lambda'", Status.RUNTIME_ERROR, None),
    ("load", "payload.x", "1", Status.RUNTIME_ERROR, None),
]


@pytest.mark.parametrize("op, field, value, status, check", CASES, ids=[f"{c[0]}-{c[1]}-{c[2][:8]}" for c in CASES])
def test_a_rewritten_reply_field_is_a_status_never_an_exception(tmp_path, solbench_cache, monkeypatch, op, field,
                                                                 value, status, check):
    """cand_reply_fuzz rewrites one field of the first reply to ``op`` inside the worker. The
    evaluation returns one trace: RUNTIME_ERROR naming the op, or REWARD_HACK where the
    reply contradicts what the parent knows or observed. The parent's read of the worker's
    memory names the patched reply path at once (harness_patch): off, to test what the
    parent does with each forged field behind it."""
    monkeypatch.setenv("SOLBENCH_MEMGUARD", "off")
    p = _mm(tmp_path, n=64)
    cfg = EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False)
    cfg = cfg.with_timeout(20)
    cand = _cand(p, "cand_reply_fuzz.py", **{'OP = "call"': f"OP = {op!r}",
                                             'FIELD = "payload.returned.0.shape"': f"FIELD = {field!r}",
                                             'VALUE = "None"': f"VALUE = {value!r}"})
    t0 = time.monotonic()
    traces = evaluate(p, cand, cfg)
    assert time.monotonic() - t0 < 60
    (t,) = traces
    ev = t.evaluation
    assert ev.status == status, (ev.status, ev.findings, ev.log[-400:])
    if check is not None:
        assert check in _checks(ev), ev.findings
    if status == Status.RUNTIME_ERROR:
        assert op in ev.log or op in str([f.evidence for f in ev.findings]), ev.log[-400:]
