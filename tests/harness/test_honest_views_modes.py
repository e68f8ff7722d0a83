"""Issue 30, item 7: two honest candidates that were REWARD_HACK, and their hostile twins.

- ``torch.set_default_device`` at module top pushes torch's own default-device mode; only
  torch's exact DeviceContext, with its method as bound at worker start, is not
  ``interposition`` (a subclass or a patched method still is).
- A returned transposed view: its strided copy into the parent's buffer is made by the
  parent, outside the timed window, as a contiguous output's is (the worker's copy ran
  inside it and was charged against the candidate).
"""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import matmul_problem, py_solution, write_problem

HERE = Path(__file__).resolve().parent
CFG = dict(device="cpu", iters=8, rounds=3)


def _cand(p, name, **replace):
    s = load_solution(HERE / name, p)
    src = s.sources[0].content
    for a, b in replace.items():
        assert a in src
        src = src.replace(a, b)
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


@pytest.mark.parametrize("mode, status", [("honest", Status.PASSED), ("subclass", Status.REWARD_HACK),
                                          ("patched", Status.REWARD_HACK)])
def test_default_device_mode_is_not_interposition_but_a_disguised_mode_is(tmp_path, solbench_cache, mode, status):
    """Old code: "honest" was REWARD_HACK interposition (torch_function_modes 0 -> 1)."""
    p = matmul_problem(tmp_path, (128,))
    (t,) = evaluate(p, _cand(p, "cand_default_device.py", **{'MODE = "honest"': f'MODE = "{mode}"'}),
                    EvalConfig(**CFG, reference_timing=False))
    ev = t.evaluation
    assert ev.status == status, (ev.status, ev.findings)
    hooks = [f for f in ev.findings if f.check == "interposition"]
    assert bool(hooks) == (status == Status.REWARD_HACK), ev.findings
    if hooks:
        assert "torch_function_modes" in hooks[0].message


def _transpose_problem(root: Path, n: int):
    return load_problem(write_problem(root / "tr", {
        "name": "tr", "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n", "n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n", "n"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x):\n    return x.t().contiguous()\n",
    }, [{"uuid": f"w{n}", "axes": {"n": n}, "inputs": {"x": {"type": "random"}}}]))


def test_a_returned_transposed_view_is_copied_outside_the_window(tmp_path, solbench_cache):
    """Old code: REWARD_HACK timing_plausibility (the worker used 30 ms of CPU for the strided
    copy of the 3072 x 3072 view inside a window whose call its clock timed at 0.05 ms). Now
    PASSED, its samples holding no copy: faster than the reference, which materialises the
    transpose (6 ms against 200 ms on a loaded 2-core host)."""
    p = _transpose_problem(tmp_path, 3072)
    from cand_transposed_view import TRANSPOSE

    (t,) = evaluate(p, py_solution("tview", TRANSPOSE, "tr"), EvalConfig(**CFG))
    ev = t.evaluation
    assert ev.status == Status.PASSED, (ev.status, ev.findings)
    assert not any(f.check == "timing_plausibility" for f in ev.findings), ev.findings
    assert ev.timing.median_ms < ev.reference_timing.median_ms, (ev.timing, ev.reference_timing)


def test_a_strided_result_of_real_work_passes_with_the_parents_copy(tmp_path, solbench_cache):
    p = matmul_problem(tmp_path, (128, 256))
    for t in evaluate(p, _cand(p, "cand_transposed_view.py"), EvalConfig(**CFG)):
        assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)
