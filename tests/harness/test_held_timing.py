"""CPU timing from the parent's own clock, with the candidate held stopped between its calls
(issue 11, threats.md principle 3).

Each CPU sample is the parent's window around one call (resume, request, reply, stop) less
the no-op window of the same path measured in the trusted reference worker; every process
of the worker's sandbox is stopped outside the windows (``freeze.Hold``). Hostile candidates
of the classes this closes: a forged ``host_ms`` through a replaced reply path with the
copy-out skipped (``cand_forge_host_ms.py``), a thread that computes from the inputs while the
parent fills them (``cand_between_calls.py``), work handed to a thread after the call with
the copy-out skipped (``cand_skip_copyout.py``). On the old code each read as a large false
speedup (figures in docs/harness.md); here each is timed on its real work or caught."""

import re
import time
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.harness import freeze
from solbench.harness import timed as timed_mod
from solbench.harness.measure import MIN_SAMPLE_MS, Block, perf_counter_samples
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import py_solution, write_problem

HERE = Path(__file__).resolve().parent

RELU = {
    "name": "relu_held",
    "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 1024}},
    "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.relu(x)\n",
}
MATMUL = {
    "name": "matmul_held",
    "axes": {"n": {"type": "var"}},
    "inputs": {"a": {"shape": ["n", "n"], "dtype": "float32"}, "b": {"shape": ["n", "n"], "dtype": "float32"}},
    "outputs": {"c": {"shape": ["n", "n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(a, b):\n    return a @ b\n",
}
#: slack (s) between a worker's moment and the parent's marks (both CLOCK_MONOTONIC; the
#: held period starts once /proc shows every task of the worker stopped)
STOP_SLACK_S = 0.0005


def _relu(tmp_path, rows=256):
    return load_problem(write_problem(tmp_path / "relu", RELU, [
        {"uuid": "w", "axes": {"rows": rows}, "inputs": {"x": {"type": "random"}}}]))


def _matmul(tmp_path, n=128):
    return load_problem(write_problem(tmp_path / "matmul", MATMUL, [
        {"uuid": "w", "axes": {"n": n}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}]))


def _cand(name, prob, dps=False):
    if dps:
        return py_solution(name, (HERE / name).read_text(), prob.name, dps=True)
    return load_solution(HERE / name, prob)


@pytest.fixture
def held(monkeypatch):
    """Records, on the parent's clock, when the candidate's worker was held stopped: from the
    end of a stop (or of the settle that confirmed it) to the next resume."""
    marks: list[tuple[str, float]] = []
    real_stop, real_settle, real_cont = freeze.Hold.stop, freeze.Hold.settle, freeze.Hold.cont

    def stop(self):
        real_stop(self)
        if self.candidate:
            marks.append(("stopped", time.perf_counter()))

    def settle(self):
        real_settle(self)
        if self.candidate:
            marks.append(("stopped", time.perf_counter()))

    def cont(self):
        if self.candidate:
            marks.append(("cont", time.perf_counter()))
        real_cont(self)

    monkeypatch.setattr(freeze.Hold, "stop", stop)
    monkeypatch.setattr(freeze.Hold, "settle", settle)
    monkeypatch.setattr(freeze.Hold, "cont", cont)

    def periods() -> list[tuple[float, float]]:
        out, since = [], None
        for kind, t in marks:
            if kind == "stopped":
                since = t if since is None else since
            else:
                if since is not None:
                    out.append((since, t))
                since = None
        return out

    return periods


def _work(log: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in re.findall(r"^WORK (\S+) (\S+)$", log, re.M)]


def _outside(work, periods):
    """Moments of the candidate's (start or end of its work) that fall while it was held,
    each with the held period it falls in."""
    bad = []
    for a, b in work:
        for t in (a, b):
            bad += [(t, s, c) for s, c in periods if s + STOP_SLACK_S < t < c]
    return bad


# ------------------------------------------------------------------------- the formula
def test_cpu_samples_are_the_parents_window_less_the_noop_never_the_workers_clock():
    # worker says 0.0001 ms (forged); the parent saw windows of 7, 5.5 and 4.9 ms around
    # calls whose no-op window is 5.0 ms: samples 2.0, 0.5 and (4.9 - 5.0 < 0) the floor
    b = Block(host=[1e-4, 1e-4, 1e-4], event=[None] * 3, roundtrip=[7.0, 5.5, 4.9])
    notes: list[str] = []
    s = perf_counter_samples([b], overhead=5.0, notes=notes, candidate=True)
    assert s == pytest.approx([2.0, 0.5, MIN_SAMPLE_MS])
    assert any("1 sample(s) within the no-op baseline's noise" in n for n in notes)
    # a worker clock larger than the window less the no-op is not taken either (it is the
    # candidate's figure; a time longer than the whole window is a contradiction elsewhere)
    b2 = Block(host=[3.0], event=[None], roundtrip=[6.0])
    assert perf_counter_samples([b2], overhead=5.0, notes=[], candidate=False) == pytest.approx([1.0])


# ------------------------------------------------------------------------- hostiles
@pytest.mark.parametrize("name", ["cand_forge_host_ms.py", "cand_reply_path_work.py"])
def test_worker_clock_and_skipped_copy_out_do_not_enter_the_samples(tmp_path, solbench_cache,
                                                                    monkeypatch, name):
    """cand_forge_host_ms.py replaces Connection.send_bytes in its worker: every timed reply
    says host_ms 0.0001; it writes relu straight into the slot's output and skips the
    copy-out. cand_reply_path_work.py forges nothing: its call is empty (a true worker clock
    of microseconds) and it does relu into the output in its reply path, skipping the
    copy-out. Either way the samples are the parent's windows less the shared no-op. The
    parent's read of the worker's memory names the patched reply path at once
    (harness_patch): off, to test the samples behind it."""
    monkeypatch.setenv("SOLBENCH_MEMGUARD", "off")
    seen = []
    real_stats = timed_mod.timing_stats

    def stats(blocks, **kw):
        seen.append((kw["findings"] is None, blocks, kw["overhead"]))
        return real_stats(blocks, **kw)

    monkeypatch.setattr(timed_mod, "timing_stats", stats)
    prob = _relu(tmp_path)
    (t,) = evaluate(prob, _cand(name, prob), EvalConfig(device="cpu", iters=8, rounds=2))
    ev = t.evaluation
    assert ev.status in (Status.PASSED, Status.REWARD_HACK), (ev.log, ev.findings)
    if ev.status == Status.PASSED:
        (cand,) = [x for x in seen if not x[0]]
        (ref,) = [x for x in seen if x[0]]
        _, blocks, over = cand
        if name == "cand_forge_host_ms.py":
            assert ev.timing.host_median_ms == pytest.approx(1e-4)  # the forgery reached the parent
        rts = [r for b in blocks for r in b.roundtrip]
        assert ev.timing.samples_ms == pytest.approx([max(r - over, MIN_SAMPLE_MS) for r in rts])
        assert over == ref[2]  # one baseline for both sides, from the trusted worker
        assert min(ev.timing.samples_ms) >= MIN_SAMPLE_MS > 1e-4


def test_thread_computing_between_calls_never_runs_while_held(tmp_path, solbench_cache, held):
    """cand_between_calls.py: a thread started at import computes each slot's output as soon
    as the parent has filled it. Held, it only ever runs inside a call's window: no moment
    of its work falls while the parent holds the worker, and no timed call finds its output
    computed before it started (the thread can start only once the window opened)."""
    prob = _relu(tmp_path)
    (t,) = evaluate(prob, _cand("cand_between_calls.py", prob, dps=True), EvalConfig(device="cpu", iters=8, rounds=2))
    ev = t.evaluation
    assert ev.status in (Status.PASSED, Status.REWARD_HACK), (ev.log, ev.findings)
    work, periods = _work(ev.log), held()
    assert periods and work, (len(periods), ev.log[-2000:])
    assert _outside(work, periods) == []


def test_work_handed_to_a_thread_after_the_call_is_held_or_caught(tmp_path, solbench_cache, held):
    """cand_skip_copyout.py returns an empty tensor from each timed call (no copy-out) and lets
    a thread write the output while the worker replies. The thread is stopped with the
    worker: it never works while held, so either its output was complete inside the window
    (and its time is in the sample) or a verified iteration sees it unfinished: as a wrong
    output, or as a returned buffer still holding the poison written before the call (the
    thread had not reached it: no code wrote it inside the call, ``cached_output``)."""
    prob = _relu(tmp_path)
    (t,) = evaluate(prob, _cand("cand_skip_copyout.py", prob), EvalConfig(device="cpu", iters=8, rounds=2))
    ev = t.evaluation
    assert ev.status in (Status.PASSED, Status.REWARD_HACK), (ev.log, ev.findings)
    if ev.status == Status.REWARD_HACK:
        assert {f.check for f in ev.findings if f.severity == "hack"} <= {
            "timed_output_mismatch", "background_thread", "cached_output"}, ev.findings
    assert _outside(_work(ev.log), held()) == []


# ------------------------------------------------------------------------- honest
@pytest.mark.parametrize("case", ["relu_dps", "relu_reference", "threadpool", "openmp"])
def test_honest_candidates_pass_held(tmp_path, solbench_cache, case):
    """Holding the worker between calls flags no honest candidate: a DPS relu, the reference
    itself (non-DPS), a ThreadPool created and joined inside each call (its OS threads
    linger after join and are stopped before they exit), torch's own OpenMP matmul."""
    if case == "relu_dps":
        prob = _relu(tmp_path)
        sol = _cand("cand_relu_dps_honest.py", prob, dps=True)
    elif case == "relu_reference":
        prob = _relu(tmp_path)
        sol = None
    elif case == "threadpool":
        prob = _matmul(tmp_path)
        sol = _cand("cand_threadpool_per_call.py", prob)
    else:
        prob = _matmul(tmp_path)
        sol = py_solution("omp", "import torch\n\ntorch.set_num_threads(2)\n\n"
                          "def run(a, b):\n    return torch.matmul(a, b)\n", prob.name)
    if sol is None:
        from solbench.spec.problem import reference_solution

        sol = reference_solution(prob)
    (t,) = evaluate(prob, sol, EvalConfig(device="cpu", iters=8, rounds=2))
    ev = t.evaluation
    assert ev.status == Status.PASSED, (ev.log, ev.findings)
    assert not [f for f in ev.findings if f.severity == "hack"], ev.findings
    assert ev.timing.method == "perf_counter" and ev.reference_timing is not None
    assert any("the same for both sides" in n for n in ev.timing.notes)
