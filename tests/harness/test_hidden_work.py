"""Work a candidate hides in the worker's own steps after the worker's clock stops is counted
on the CPU (red team 2026-11-30: a sys.stdout wrapper whose flush(), called by the worker
loop before it replies, computed the DPS output; also gc callbacks, a patched
Connection.send_bytes, an aten copy_ override). The parent's round trip less the no-op round
trip bounds each sample from below. Sleep stands in for the hidden work so the figure is
deterministic on a loaded host: 30 ms per call must show up in the samples."""
from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status, load_problem

from harness_helpers import py_solution, write_problem

HIDE_IN_FLUSH = """import sys
import time
import torch

_PENDING = []


class _Out:
    def __init__(self, inner):
        self._inner = inner

    def write(self, s):
        return self._inner.write(s)

    def flush(self):
        while _PENDING:
            x, y = _PENDING.pop()
            time.sleep(0.03)  # the hidden work
            y.copy_(torch.relu(x))
        return self._inner.flush()

    def __getattr__(self, k):
        return getattr(self._inner, k)


sys.stdout = _Out(sys.stdout)


def run(x, y):
    _PENDING.append((x, y))
"""

DEF = {
    "name": "relu_dps",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.relu(x)\n",
}


def test_work_hidden_after_the_clock_is_timed(tmp_path, solbench_cache):
    p = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("hide", HIDE_IN_FLUSH, p.name, dps=True),
                    EvalConfig(device="cpu", iters=8, rounds=2, reference_timing=False))
    assert t.evaluation.status == Status.PASSED  # its outputs are right, just late
    tm = t.evaluation.timing
    assert min(tm.samples_ms) >= 25.0, tm.samples_ms  # the 30 ms are in every sample
    assert tm.host_median_ms < 5.0  # what the worker's own clock saw
    assert any("round trip" in n for n in tm.notes)
