"""An honest candidate on a loaded host is never a hack.

The case: ten busy loops share the only CPU the parent and the sandboxed worker may use
(all pinned to one CPU), so every wake-up of either waits for the loops' time slices. An
honest relu over 4,096 elements (well under 1 ms) then sat in parent windows of 11-43 ms
against a 4-12 ms no-op, and the CPU plausibility cross-check called it REWARD_HACK
``timing_plausibility`` on 2 of 3 workloads (3 of 3 with three loops on a busier host; CI
saw it at load 8 through the Ray executor). The part of each window the parent's and the
worker's main threads spent waiting for a CPU is not the call: taken out, nothing is left.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from solbench.harness import guards
from solbench.spec import load_problem
from solbench.spec.trace import Status

from harness_helpers import evaluate_elsewhere, py_solution, write_problem

RELU = {"name": "relu_small", "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x):\n    return torch.relu(x)\n"}
BUSY = "import os\nos.sched_setaffinity(0, {%d})\nwhile True:\n    pass\n"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_an_honest_call_on_a_cpu_shared_with_busy_loops_is_not_a_hack(tmp_path):
    if guards.runqueue_wait_ms() is None:
        pytest.skip("this kernel keeps no schedstat: the plausibility check stays advisory here")
    prob = load_problem(write_problem(tmp_path / "relu", RELU, [
        {"uuid": f"w{k}", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}} for k in range(4)]))
    sol = py_solution("relu", RELU["reference"], prob.name)
    # a call whose work is on threads started and joined inside it: the main thread sleeps
    # on the join while the pool's threads wait for the CPU, and are gone by the window's end
    pool = py_solution("relu_pool", "import torch\nfrom concurrent.futures import ThreadPoolExecutor\n\n"
                       "def run(x):\n    with ThreadPoolExecutor(2) as ex:\n"
                       "        return ex.submit(torch.relu, x).result()\n", prob.name)
    keep = os.sched_getaffinity(0)
    cpu = min(keep)
    busy = []
    try:
        os.sched_setaffinity(0, {cpu})  # the workers started below inherit it
        busy = [subprocess.Popen([sys.executable, "-c", BUSY % cpu]) for _ in range(10)]
        # in another process: here the harness would take the loops for a candidate's children
        traces = [t for s in (sol, pool) for t in evaluate_elsewhere(prob, s, tmp_path / s.name, device="cpu",
                                                                      iters=3, rounds=2)]
    finally:
        for b in busy:
            b.kill()
            b.wait()
        os.sched_setaffinity(0, keep)
    for t in traces:
        ev = t.evaluation
        assert ev.status == Status.PASSED, (t.solution, t.workload.uuid, ev.status, ev.findings)
        assert not any(f.severity == "hack" for f in ev.findings), ev.findings
