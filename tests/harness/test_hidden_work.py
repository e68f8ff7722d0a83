"""Work a candidate hides in the worker's own steps after the worker's clock stops is counted
on the CPU: the parent's round trip less the no-op round trip bounds each sample from below
(red teams 2026-11-30 hid it in a sys.stdout wrapper the worker flushed, gc callbacks, a
patched Connection.send_bytes, an aten copy_ override, a lowered gc threshold: those routes
are now closed or flagged, tested here and in the corpus); and the reference's timing cannot
be disturbed by the candidate's processes."""
import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status, load_problem

from harness_helpers import matmul_problem, py_solution, write_problem

#: the same with the collector's threshold lowered to 1: flagged as interposition
HIDE_LOW_THRESHOLD = """import gc
import time
import torch


class _Later:
    def __init__(self, x, y):
        self.x, self.y = x, y
        self.me = self

    def __del__(self):
        time.sleep(0.03)
        self.y.copy_(torch.relu(self.x))


def run(x, y):
    gc.set_threshold(1, 10, 10)
    _Later(x, y)
"""

DEF = {
    "name": "relu_dps",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.relu(x)\n",
}


def test_work_hidden_after_the_clock_is_timed():
    """The CPU rule itself, on hand-made figures: whatever the worker's clock saw (0.01 ms),
    each sample is the parent's window less the no-op window (35 - 2 ms), so
    work run anywhere between the request and the reply is in the sample (the routes the red
    teams used to run it there, stdout, gc callbacks, a lowered gc threshold, dispatcher and
    mode hooks, are also flagged; cyclic garbage collected at the default threshold is not,
    and this rule is what times it)."""
    import pytest

    from solbench.harness.measure import Block, timing_stats

    block = Block(host=[0.01] * 4, event=[None] * 4, roundtrip=[35.0, 35.0, 36.0, 34.0])
    tm = timing_stats([block], is_cuda=False, warmup=2, flush_bytes=0, findings=[], overhead=2.0)
    assert tm.method == "perf_counter"
    assert tm.samples_ms == pytest.approx([33.0, 33.0, 34.0, 32.0]) and tm.median_ms == pytest.approx(33.0)
    assert any("missed part of the parent's window" in n for n in tm.notes)


def test_lowered_gc_threshold_is_interposition(tmp_path, solbench_cache):
    p = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("low_thr", HIDE_LOW_THRESHOLD, p.name, dps=True),
                    EvalConfig(device="cpu", iters=8, rounds=2, reference_timing=False))
    assert t.evaluation.status == Status.REWARD_HACK
    f = [x for x in t.evaluation.findings if x.check == "interposition"]
    assert f and "gc_threshold" in f[0].message


def _matmul_problem(tmp_path):
    return matmul_problem(tmp_path, (256,), uuid="w")


def test_demoting_the_reference_worker_is_a_hack(tmp_path, solbench_cache, unsandboxed):
    """Red team round 3: right answers, but every call sets the sibling reference worker's
    threads to SCHED_IDLE, nice 19 and one CPU (no helper process), so the reference is slow
    when it is timed. Needs reference timing (the corpus's quick setting has none)."""
    from pathlib import Path

    from solbench.spec import load_solution

    p = _matmul_problem(tmp_path)
    s = load_solution(Path(__file__).with_name("cand_demote_reference.py"), p)
    (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=6, rounds=2))
    assert t.evaluation.status == Status.REWARD_HACK, t.evaluation.log
    assert any(f.check == "reference_tampered" for f in t.evaluation.findings)


def test_joined_per_call_thread_pool_is_honest(tmp_path, solbench_cache):
    """Red team round 3 false positive: a ThreadPool created and joined inside every call
    leaves its OS threads in /proc for about 1 ms after join(); not a background thread."""
    from pathlib import Path

    from solbench.spec import load_solution

    p = _matmul_problem(tmp_path)
    s = load_solution(Path(__file__).with_name("cand_threadpool_per_call.py"), p)
    (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=10, rounds=2))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.log, t.evaluation.findings)
    assert not [f for f in t.evaluation.findings if f.severity == "hack"]


def test_helper_escaping_the_pause_to_stop_the_reference_is_a_hack(tmp_path, solbench_cache, unsandboxed):
    """Red team round 5: right answers, but during the timed calls it starts a helper in its
    own session (the SIGSTOP the parent sends to the candidate's process group does not reach
    it), which stops and resumes the sibling reference worker while that is timed and exits
    when the candidate resumes (PASSED at 4-6x against 1x honest before the fix). Every process
    of the candidate must be stopped while the reference runs."""
    from pathlib import Path

    from solbench.spec import load_solution

    p = _matmul_problem(tmp_path)
    s = load_solution(Path(__file__).with_name("cand_ref_stopper.py"), p)
    (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=6, rounds=2))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.log, ev.findings)
    f = [x for x in ev.findings if x.check == "child_process"]
    # caught right after the timed call that started it (the per-call process check), or,
    # if it was started between calls, when the reference's block begins
    assert f and ("kept running" in f[0].message or "started processes" in f[0].message)


@pytest.mark.parametrize("cand", ["cand_helper_triton_prefix.py", "cand_helper_compile_worker_disguise.py",
                                  "cand_helper_zombie_leader.py"])
def test_disguised_helpers_that_stop_the_reference_are_hacks(tmp_path, solbench_cache, unsandboxed, cand):
    """Red team round 6: the reference stopper of round 5, disguised: started as
    `python -m tritonhelper` (passed a prefix allow-list), as the exact command line of
    inductor's compile-worker script with the payload in a sitecustomize.py, or as a process
    whose main thread exited (its stat says Z, its other thread runs). Each was PASSED at
    5-15x against 0.1-0.2x honest before; every process of the candidate is now stopped by pid
    and checked thread by thread while the reference runs."""
    from pathlib import Path

    from solbench.spec import load_solution

    p = _matmul_problem(tmp_path)
    s = load_solution(Path(__file__).with_name(cand), p)
    (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=6, rounds=2))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.log, ev.findings)
    assert [x for x in ev.findings if x.check == "child_process"]
