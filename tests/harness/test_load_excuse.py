"""Red team of the CPU load correction of ``timing_plausibility``.

Before the worker's own clock is compared with the parent's window, the parent takes out the
part of the window the host's load took. A first version took the larger of the host-wide
CPU pressure stall (``/proc/pressure/cpu`` ``some``) and the run-queue wait of its and the
worker's main threads. The host-wide figure grows whenever any two tasks share a CPU, the
candidate's own threads and other users' processes included, so a frozen worker clock was
excused (PASSED instead of REWARD_HACK):

* when the candidate made the load itself (threads joined inside the call, as an honest
  pool is, its main thread spinning: ``cand_self_load_frozen_clock.py``), on any host with
  2+ CPUs: 6 of 6 runs PASSED;
* when the host was loaded on every CPU and the candidate only slept
  (``cand_reply_hide_patch.py``): 3 of 4 runs PASSED.

Now only the two threads' own run-queue waits are taken out (a sleeping main thread waits
for no CPU), and the worker's CPU time in the window, which load cannot stretch, is judged
against its clock as well (the self-made load is CPU the worker used). What was never lost
is the time: the CPU samples are the parent's windows (checked below).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, guards
from solbench.spec import Status, load_solution

from harness_helpers import evaluate_elsewhere, matmul_problem

HERE = Path(__file__).resolve().parent
BUSY = "import os\nos.sched_setaffinity(0, {%d})\nwhile True:\n    pass\n"
needs_psi = pytest.mark.skipif(guards.runqueue_wait_ms() is None,
                               reason="no schedstat here: the wall gap is advisory by design")


def _hidden_work_ms() -> float:
    """The least wall time (ms) of the self-loading candidate's hidden work in one call:
    N_THREADS threads each hashing for SPIN_CPU_S of its own CPU time, on the CPUs a worker
    may use (CPU-bound work on n CPUs takes at least its CPU time / n)."""
    return 16 * 5.0 / len(os.sched_getaffinity(0))


def _check(t, hidden_ms: float):
    ev = t.evaluation
    if ev.timing is not None:
        # what the hole leaves intact: the samples are the parent's windows around the calls,
        # so the hidden work is in the time whatever the worker's clock said (half of its
        # least wall time, for slack)
        assert ev.timing.median_ms >= 0.5 * hidden_ms, (ev.timing, hidden_ms)
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.timing and ev.timing.host_median_ms, ev.findings)
    assert any(f.check == "timing_plausibility" and f.severity == "hack" for f in ev.findings), ev.findings


@needs_psi
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_frozen_clock_behind_self_made_load_is_still_a_hack(tmp_path, solbench_cache, monkeypatch):
    # the parent's read of the worker's memory names the clock patch first: off, to test the
    # window cross-check behind it
    monkeypatch.setenv("SOLBENCH_MEMGUARD", "off")
    p = matmul_problem(tmp_path, (256,))
    hidden_ms = _hidden_work_ms()
    (t,) = evaluate(p, load_solution(HERE / "cand_self_load_frozen_clock.py", p),
                    EvalConfig(device="cpu", iters=6, rounds=2, reference_timing=False))
    _check(t, hidden_ms)


@needs_psi
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_sleeping_frozen_clock_on_a_host_loaded_on_every_cpu_is_still_a_hack(tmp_path, solbench_cache, monkeypatch):
    monkeypatch.setenv("SOLBENCH_MEMGUARD", "off")  # as above
    p = matmul_problem(tmp_path, (256,))
    sol = load_solution(HERE / "cand_reply_hide_patch.py", p)
    keep = os.sched_getaffinity(0)
    busy = []
    try:
        # two busy loops on each CPU: every CPU always has a task waiting, none of them ours
        busy = [subprocess.Popen([sys.executable, "-c", BUSY % c]) for c in sorted(keep) for _ in range(2)]
        # in another process: here the harness would take the loops for a candidate's children
        (t,) = evaluate_elsewhere(p, sol, tmp_path / "run", device="cpu", iters=6, rounds=2,
                                  reference_timing=False)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    _check(t, 300.0)  # the candidate sleeps 0.3 s in each call
