"""The adaptive number of timed iterations (harness/stopping.py): the rule with values worked
out by hand, and the harness on the CPU running a real candidate under it."""

import math
import re

import pytest

from solbench.harness import EvalConfig
from solbench.harness.evaluator import Evaluator
from solbench.harness.stopping import iterations_needed, relative_halfwidth, total_iterations
from solbench.spec import Status, load_problem, reference_solution

from harness_helpers import py_solution, write_problem


# ------------------------------------------------------------------ the rule
def test_iterations_needed_by_hand():
    xs = [float(x) for x in range(1, 10)]  # median 5, quartiles 3 and 7 (linear): IQR 4
    # n = ceil((1.57 * 4 / (0.5 * 5)) ** 2) = ceil(2.512 ** 2) = ceil(6.310) = 7
    assert iterations_needed(xs, 0.5) == 7
    # at 1%: ceil((1.57 * 4 / 0.05) ** 2) = ceil(125.6 ** 2) = ceil(15775.36) = 15776
    assert iterations_needed(xs, 0.01) == 15776
    # half-width 1.57 * 4 / sqrt(9) / 5 = 0.41867
    assert relative_halfwidth(xs) == pytest.approx(1.57 * 4 / 3 / 5)


def test_quiet_pilot_stops_at_the_minimum_noisy_one_at_the_cap():
    quiet = [1.0, 1.0, 1.001, 1.0, 0.999, 1.0]  # IQR 0 (quartiles both 1.0): needs 1
    assert iterations_needed(quiet, 0.01) == 1
    assert total_iterations([quiet, quiet], 20, 50, 0.01) == 20
    noisy = [1.0, 2.0, 3.0, 4.0, 5.0]  # IQR 2, median 3: needs ceil((1.57*2/0.03)**2) = 10956
    assert total_iterations([quiet, noisy], 20, 50, 0.01) == 50
    # in between: IQR/median 2.4% (the H200 median) needs ceil((1.57*0.024/0.01)**2) = 15 -> min 20;
    # 4% needs ceil(6.28**2) = 40
    mid = [0.97, 0.98, 0.99, 1.0, 1.01, 1.02, 1.03]  # quartiles 0.985, 1.015: IQR 0.03
    assert iterations_needed(mid, 0.01) == math.ceil((1.57 * 0.03 / 0.01) ** 2) == 23
    assert total_iterations([quiet, mid], 20, 50, 0.01) == 23


def test_a_side_that_cannot_say_gets_the_cap():
    assert iterations_needed([0.0, 0.0, 0.0], 0.01) is None  # median 0
    assert iterations_needed([1.0], 0.01) is None
    assert total_iterations([[1.0, 1.0, 1.0], [0.0, 0.0]], 20, 50, 0.01) == 50
    with pytest.raises(ValueError):
        total_iterations([[1.0, 1.0]], 30, 20, 0.01)
    with pytest.raises(ValueError):
        iterations_needed([1.0, 2.0], 0.0)


def test_config_counts():
    # 16 on the CPU: 4 blocks of 4 per side, the pairs a resolved CPU speedup needs
    assert EvalConfig(device="cpu").n_iters_min() == EvalConfig(device="cpu").n_iters() == 16
    assert [EvalConfig(device="cpu").n_blocks(n) for n in (16, 12, 10, 3)] == [4, 3, 2, 1]
    assert EvalConfig(device="cuda").n_blocks(20) == 2
    c = EvalConfig(device="cpu", iters=7, min_iters=3)
    assert c.n_iters_min() == c.n_iters() == 7  # --iters is a fixed count
    assert EvalConfig(device="cpu", min_iters=4).n_iters_min() == 4
    assert EvalConfig(device="cpu", min_iters=40).n_iters_min() == 16  # never above the cap


# ------------------------------------------------------------------ the harness
DEF = {
    "name": "row_softmax_stop",
    "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 16}},
    "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n",
}

#: correct, its consecutive calls alternating 2 ms and 40 ms: any pilot of two or more
#: consecutive calls holds both, so it cannot pin the median to 1% (a random choice of the
#: sleep drew the same one twice in a pilot of 2 a quarter of the time)
JITTER = """import time
import torch

_calls = [0]

def run(x):
    _calls[0] += 1
    time.sleep(0.002 if _calls[0] % 2 else 0.04)
    return torch.softmax(x, dim=-1)
"""


@pytest.fixture(scope="module")
def problem(tmp_path_factory, solbench_cache):
    root = tmp_path_factory.mktemp("row_softmax_stop")
    return load_problem(write_problem(root, DEF, [{"uuid": "w8", "axes": {"rows": 8},
                                                   "inputs": {"x": {"type": "random"}}}]))


def _note_n(ts) -> int:
    notes = [x for x in ts.notes if x.startswith("adaptive iterations")]
    assert len(notes) == 1, ts.notes
    return int(re.match(r"adaptive iterations: (\d+) per side", notes[0]).group(1))


def test_adaptive_count_on_the_cpu(problem):
    """min 4, max 16: a jittery correct candidate gets the cap on both sides; the reference
    as candidate gets a count in [4, 16], the same on both sides, as its note states."""
    cfg = EvalConfig(device="cpu", rounds=2, min_iters=4, warmup=1, build_timeout_s=120.0)
    ev = Evaluator(problem, cfg)
    try:
        [ref] = ev.evaluate(reference_solution(problem))
        [jit] = ev.evaluate(py_solution("jitter", JITTER, problem.name))
    finally:
        ev.close()
    for t in (ref, jit):
        e = t.evaluation
        assert e.status == Status.PASSED, e.log
        n = _note_n(e.timing)
        assert 4 <= n <= 16 and e.timing.n_samples == n
        assert e.reference_timing.n_samples == n and _note_n(e.reference_timing) == n
    assert jit.evaluation.timing.n_samples == 16
