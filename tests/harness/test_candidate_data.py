"""Issue 30, item 1: any exception raised while handling a candidate's data ends as a recorded
status of that workload, never as a crash of the harness, and later workloads still run."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, protocol
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem, py_solution

HERE = Path(__file__).resolve().parent
CFG = dict(device="cpu", iters=4, rounds=2, reference_timing=False)


def _cand(p, name, **replace):
    s = load_solution(HERE / name, p)
    src = s.sources[0].content
    for a, b in replace.items():
        src = src.replace(a, b)
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


def test_reply_address_outside_user_space_is_refused():
    ok = {"type": "torch.Tensor", "plain": True, "shape": [2], "dtype": "float32"}
    protocol.parse_reply("time_iter", "ok", {"host_ms": 1.0, "event_ms": None,
                                             "returned": [{**ok, "addr": 0x7F00_0000_1000}]})
    for addr in (0, 12, 2**63 + 4096, 0xFFFF_8000_0000_1000, 2**64 - 1):
        with pytest.raises(protocol.ReplyInvalid) as e:
            protocol.parse_reply("time_iter", "ok", {"host_ms": 1.0, "event_ms": None,
                                                     "returned": [{**ok, "addr": addr}]})
        assert "addr" in e.value.reason


@pytest.mark.parametrize("mode", ["high", "kernel"])
def test_absurd_output_address_is_a_recorded_status_and_the_run_goes_on(tmp_path, solbench_cache, mode):
    """Old code: OverflowError traceback out of evaluate() ("high"; os.preadv cannot take an
    offset past 2^63), no trace for this workload or the next."""
    p = matmul_problem(tmp_path, (64, 96))
    traces = evaluate(p, _cand(p, "cand_absurd_output_addr.py", **{'MODE = "high"': f'MODE = "{mode}"'}),
                      EvalConfig(**CFG))
    assert len(traces) == 2
    for t in traces:
        ev = t.evaluation
        assert ev.status == Status.RUNTIME_ERROR, (ev.status, ev.log[-800:])
        f = [x for x in ev.findings if x.check == "malformed_reply"]
        assert f and "addr" in f[0].evidence["reason"], ev.findings


def test_an_unforeseen_exception_on_candidate_data_is_runtime_error_with_evidence(tmp_path, solbench_cache,
                                                                                 monkeypatch):
    """The last net: an exception no check foresaw (here the parent's copy-out raising a
    KeyError on the first workload only) is RUNTIME_ERROR with ``candidate_data_error``
    naming it, and the next workload is still judged (PASSED)."""
    from solbench.harness import peek

    real, calls = peek.parent_copy_out, []

    def boom(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("no such slot")
        return real(*a, **k)

    monkeypatch.setattr(peek, "parent_copy_out", boom)
    p = matmul_problem(tmp_path, (64, 96))
    sol = py_solution("mm_ok", "import torch\n\ndef run(a, b):\n    return a @ b\n", "mm")
    t0, t1 = evaluate(p, sol, EvalConfig(**CFG))
    assert t0.evaluation.status == Status.RUNTIME_ERROR, t0.evaluation.log[-800:]
    f = [x for x in t0.evaluation.findings if x.check == "candidate_data_error"]
    assert f and f[0].evidence["type"] == "KeyError" and "no such slot" in f[0].evidence["message"]
    assert t1.evaluation.status == Status.PASSED, (t1.evaluation.status, t1.evaluation.findings)


def test_blinded_guard_reply_does_not_hide_a_clock_patch(tmp_path, solbench_cache):
    """Issue 30 item 10. Old code: PASSED (the worker's snapshot saw time.perf_counter and
    json.JSONEncoder.encode replaced; the hook emptied the lists in its reply). Now the parent
    reads the worker's memory itself: REWARD_HACK harness_patch, seen by the parent, naming
    both."""
    p = matmul_problem(tmp_path, (64,))
    (t,) = evaluate(p, load_solution(HERE / "cand_blind_clock_patch.py", p), EvalConfig(**CFG))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "harness_patch"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
    assert f[0].evidence.get("seen_by") == "parent"
    assert "time.perf_counter" in f[0].evidence["changed"] and "json.JSONEncoder.encode" in f[0].evidence["changed"]


def test_honest_candidate_passes_the_parents_read(tmp_path, solbench_cache):
    """The parent's read finds every guarded name in place for an honest candidate that
    imports more of torch (torch.nn.functional, torch.fft) and so grows the module dicts."""
    src = ("import torch\nimport torch.nn.functional as F\nimport torch.fft\nimport json, time\n\n"
           "def run(a, b):\n    return F.linear(a, b.t())\n")
    p = matmul_problem(tmp_path, (64,))
    (t,) = evaluate(p, py_solution("mm_f", src, "mm"), EvalConfig(**CFG))
    ev = t.evaluation
    assert ev.status == Status.PASSED, (ev.status, ev.findings)
    assert not any(f.check in ("harness_patch", "guards_unverified") for f in ev.findings), ev.findings


def test_memguard_finds_replaced_names_in_a_process_memory():
    """harness/memguard.py against this process's own /proc/self/mem (the path a worker's
    takes): nothing changed reads clean; a replaced function, a replaced class attribute, a
    code object swapped in place and new defaults are each named."""

    import os
    import time as _time
    import types

    from solbench.harness import memguard

    if not memguard.SUPPORTED:
        pytest.skip("no known CPython layout")
    mod = types.ModuleType("guarded")
    exec("import time\ndef f(x, y=1):\n    return x\nclass C:\n    def m(self):\n        return 1\n", mod.__dict__)
    names = {"f": (mod, "f"), "C.m": (mod.C, "m"), "clock": (mod.time, "perf_counter")}
    table = memguard.table(names)
    assert [e["name"] for e in table] == ["f", "C.m", "clock"]
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        assert memguard.changed(fd, table) == []
        mod.__dict__.update({f"pad{i}": i for i in range(500)})  # the dict grows: a new key table
        assert memguard.changed(fd, table) == []
        real = _time.perf_counter
        try:
            _time.perf_counter = lambda: 0.0
            mod.C.m = lambda self: 2
            mod.f.__defaults__ = (2,)
            assert memguard.changed(fd, table) == ["f (code or defaults replaced)", "C.m", "clock"]
        finally:
            _time.perf_counter = real
        mod.f.__code__ = (lambda x, y=1: y).__code__
        del mod.C.m
        assert memguard.changed(fd, table) == ["f (code or defaults replaced)", "C.m (removed from its namespace)"]
    finally:
        os.close(fd)

