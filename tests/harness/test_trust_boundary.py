"""Issue 11: what the candidate's process says is data (threats.md principle 7).

Each hostile candidate here passed (or crashed the parent) before the typed protocol and the
parent-side evidence; each test states the old outcome. The honest controls beside them
(a thread pool joined in the call, plain matmul) must stay PASSED.
"""

import dataclasses
import math
import time
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.harness import protocol
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem

HERE = Path(__file__).resolve().parent


def _mm(tmp_path, sizes=(256,)):
    return matmul_problem(tmp_path, sizes)


def _cand(p, name, **replace):
    s = load_solution(HERE / name, p)
    if replace:
        src = s.sources[0].content
        for a, b in replace.items():
            src = src.replace(a, b)
        s = s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})
    return s


# ------------------------------------------------------------------ the models themselves
def test_reply_models_refuse_wrong_types_ranges_and_missing_guard_fields():
    ok = protocol.parse_reply("time_iter", "ok", {"host_ms": 1.5, "event_ms": None})
    assert ok.host_ms == 1.5 and ok.interposition == []
    bad = [
        ("time_iter", {"host_ms": "0.001", "event_ms": None}, "host_ms"),      # str for a number
        ("time_iter", {"host_ms": -1.0, "event_ms": None}, "host_ms"),         # negative
        ("time_iter", {"host_ms": math.nan, "event_ms": None}, "host_ms"),     # NaN
        ("time_iter", {"host_ms": 1.0, "event_ms": None, "extra": 1}, "extra"),  # unknown field
        ("time_end", {"cupti": True, "span_ms": [0.1] * 100_001}, "span_ms"),  # unbounded list
        ("guards", {"changed": [], "interposition": [], "flags": {}}, "flags0"),  # missing field
        ("call", {"returned": [{"type": "x", "plain": True, "shape": [-1], "dtype": "f"}]}, "shape"),
    ]
    for op, payload, field in bad:
        with pytest.raises(protocol.ReplyInvalid) as e:
            protocol.parse_reply(op, "ok", payload)
        assert field in e.value.reason, (op, e.value.reason)
    with pytest.raises(protocol.ReplyInvalid):
        protocol.parse_reply("call", "maybe", {})
    err = protocol.parse_reply("call", "error", {"type": "ValueError", "message": "m", "traceback": "t"})
    assert isinstance(err, protocol.ErrorReply)


# ------------------------------------------------------------------ hostile candidates
def test_string_where_a_number_is_expected_is_a_runtime_error_not_a_crash(tmp_path, solbench_cache, monkeypatch):
    """Old code: TypeError traceback out of evaluate(), no trace. The encoder hook itself is
    now seen by the parent's read of the worker's memory (REWARD_HACK harness_patch, before
    the timed calls: test_candidate_data.py); with that read off (an interpreter whose layout
    it does not know, or turned off), the string time is still RUNTIME_ERROR malformed_reply."""
    p = _mm(tmp_path)
    (t,) = evaluate(p, _cand(p, "cand_reply_string_time.py"),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "harness_patch"]
    assert ev.status == Status.REWARD_HACK and f and f[0].evidence["seen_by"] == "parent", (ev.status, ev.findings)
    assert "json.JSONEncoder.encode" in f[0].evidence["changed"]
    monkeypatch.setenv("SOLBENCH_MEMGUARD", "off")
    (t,) = evaluate(p, _cand(p, "cand_reply_string_time.py"),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    ev = t.evaluation
    assert ev.status == Status.RUNTIME_ERROR, (ev.status, ev.log[-500:])
    f = [x for x in ev.findings if x.check == "malformed_reply"]
    assert f and f[0].evidence["op"] == "time_iter" and "host_ms" in f[0].evidence["reason"]
    assert any(x.check == "guards_unverified" for x in ev.findings)


@pytest.mark.parametrize("mode, check", [("empty", "timing_plausibility"), ("drop", "guard_reply_invalid")])
def test_forged_guard_reply_does_not_hide_a_timer_patch(tmp_path, solbench_cache, mode, check, monkeypatch):
    """Old code: PASSED (the worker's snapshot caught the frozen clock, the rewritten reply
    hid it). Emptied lists: the parent's own window shows 300 ms calls reported as 0 ms;
    deleted fields: an honest worker always sends them. The parent's read of the worker's
    memory (which names the patch first: test_candidate_data.py) is off here, so these
    second lines are what is tested."""
    monkeypatch.setenv("SOLBENCH_MEMGUARD", "off")
    p = _mm(tmp_path)
    (t,) = evaluate(p, _cand(p, "cand_reply_hide_patch.py", **{'MODE = "empty"': f'MODE = "{mode}"'}),
                    EvalConfig(device="cpu", iters=6, rounds=2, reference_timing=False))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings, ev.log[-500:])
    assert any(x.check == check and x.severity == "hack" for x in ev.findings), ev.findings


def test_swapped_flush_buffer_does_not_stop_the_parents_flush(tmp_path, solbench_cache):
    """Old code: PASSED, 1.45-1.75x faster (the worker's signature attribute was re-assigned
    with the buffer). Then the parent read its own buffer back after each call and found the
    worker's flush missing (``flush_skipped``, the path CUDA still takes). On the CPU the
    parent now writes the flush itself while the worker is stopped (docs/harness.md, "CPU:
    the parent's clock only"): the swap is made (the candidate says so) and changes
    nothing: after every timed call 64 random words of the parent's buffer hold that
    iteration's flush value, so no ``flush_skipped``, and the flush is noted for each call."""
    p = _mm(tmp_path)
    (t,) = evaluate(p, _cand(p, "cand_flush_swap.py"),
                    EvalConfig(device="cpu", iters=6, rounds=2, reference_timing=False))
    ev = t.evaluation
    assert "SWAPPED" in ev.log, ev.log[-1000:]
    assert ev.status == Status.PASSED, (ev.status, ev.findings)
    assert not any(x.check == "flush_skipped" for x in ev.findings), ev.findings
    assert any(f"written by the parent before each of {ev.timing.n_samples} calls" in n
               for n in ev.timing.notes), ev.timing.notes


def test_a_child_process_per_call_is_caught_on_every_workload(tmp_path, solbench_cache):
    """Old code: caught on some workloads, PASSED on others (one look per workload). Now the
    worker's processes are read before and after every call."""
    p = _mm(tmp_path, sizes=(64, 256, 1024))
    # (with the reference timed between the candidate's blocks, the old code PASSED all three:
    # the last child had exited by the one look after timing)
    traces = evaluate(p, _cand(p, "cand_child_per_call.py"), EvalConfig(device="cpu", iters=6, rounds=2))
    assert [t.evaluation.status for t in traces] == [Status.REWARD_HACK] * 3, \
        [(t.evaluation.status, t.evaluation.findings) for t in traces]
    for t in traces:
        f = [x for x in t.evaluation.findings if x.check == "child_process"]
        assert f and "correctness round 0" in f[0].evidence["when"]


def test_infinite_first_call_times_out_and_the_rest_is_not_run(tmp_path, solbench_cache):
    """Old code: held the evaluation for the 600 s first-call limit per workload."""
    p = _mm(tmp_path, sizes=(64, 128))
    cfg = EvalConfig(device="cpu", iters=2, rounds=2, reference_timing=False)
    cfg = cfg.with_timeout(3)
    seen = []
    t0 = time.monotonic()
    traces = evaluate(p, _cand(p, "cand_infinite_first_call.py"), cfg, on_trace=seen.append)
    assert time.monotonic() - t0 < 60
    assert [t.evaluation.status for t in traces] == [Status.TIMEOUT, Status.TIMEOUT]
    assert "no answer within 3 s" in traces[0].evaluation.log
    assert [f.check for f in traces[1].evaluation.findings] == ["skipped_after_timeout"]
    assert seen == traces  # streamed as each workload finished
    cfg = dataclasses.replace(cfg, keep_going=True)
    traces = evaluate(p, _cand(p, "cand_infinite_first_call.py"), cfg)
    assert [t.evaluation.status for t in traces] == [Status.TIMEOUT, Status.TIMEOUT]
    assert not any(f.check == "skipped_after_timeout" for t in traces for f in t.evaluation.findings)


def test_honest_controls_stay_passed(tmp_path, solbench_cache):
    p = _mm(tmp_path)
    for name in ("cand_threadpool_per_call.py",):
        (t,) = evaluate(p, _cand(p, name), EvalConfig(device="cpu", iters=6, rounds=2))
        assert t.evaluation.status == Status.PASSED, (name, t.evaluation.findings, t.evaluation.log[-300:])
        assert not [f for f in t.evaluation.findings if f.severity == "hack"]


def test_default_call_limits():
    cfg = EvalConfig()
    assert cfg.first_call_timeout_s == 300 and cfg.build_timeout_s == 600
    assert cfg.later_call_timeout(0.001) == 10.0  # the floor
    assert cfg.later_call_timeout(2.0) == 100.0  # 50x the reference's slowest call
    cfg = cfg.with_timeout(7)
    assert cfg.first_call_timeout_s == 7 and cfg.later_call_timeout(2.0) == 7


def test_cli_timeout_options(tmp_path, solbench_cache):
    """`solbench eval --timeout 3`: the infinite first call ends as TIMEOUT within seconds and
    the command exits 1 with the traces written; a bad value is one clean error line."""
    import json

    from typer.testing import CliRunner

    from solbench.cli import app

    p = _mm(tmp_path, sizes=(64,))
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(app, ["eval", str(p.path), "-s", str(HERE / "cand_infinite_first_call.py"),
                                 "--device", "cpu", "--timeout", "3", "--build-timeout", "120",
                                 "--rounds", "2", "--json", "-o", str(out)])
    assert r.exit_code == 1, r.output
    (t,) = json.loads(r.stdout)
    assert t["evaluation"]["status"] == "TIMEOUT"
    assert len(out.read_text().splitlines()) == 1
    r = CliRunner().invoke(app, ["eval", str(p.path), "--device", "cpu", "--timeout", "-1"])
    assert r.exit_code == 2 and "--timeout" in r.output


@pytest.mark.slow
def test_a_process_outside_the_workers_tree_is_child_process(tmp_path, solbench_cache):
    """Red team: a helper made with clone(CLONE_PARENT) + setsid is a child of the sandbox's
    init, not of the worker, and escaped the pause while the reference was timed (honest
    matmul read 1.3x). Every process of the sandbox is the candidate's: it is stopped with
    the worker and reported."""
    from solbench.harness.sandbox import resolve_mode

    if resolve_mode("cpu")[0] == "none":
        pytest.skip("no sandbox on this host: the worker's tree is the whole candidate")
    p = _mm(tmp_path, sizes=(128,))
    (t,) = evaluate(p, _cand(p, "cand_clone_parent_hog.py"), EvalConfig(device="cpu", iters=6, rounds=2))
    assert t.evaluation.status == Status.REWARD_HACK, (t.evaluation.status, t.evaluation.findings)
    f = [x for x in t.evaluation.findings if x.check == "child_process"]
    assert f and "outside_worker_tree" in str(f[0].evidence), f
