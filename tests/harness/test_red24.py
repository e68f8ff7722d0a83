"""Red team 24: the process check's one walk per timed call (its baseline the previous
call's walk; the sandbox less the worker's tree as init's other children's trees) and
RLIMIT_DATA set after the worker's imports to the cap plus its untouched data. Each hostile
candidate is a real file under tests/harness/ run through the real harness on the CPU; the
honest controls beside them must PASS with no finding."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, sandbox
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem, py_solution

HERE = Path(__file__).resolve().parent
MIB = 1 << 20

sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")


def _cand(p, name, **replace):
    s = load_solution(HERE / name, p)
    if replace:
        src = s.sources[0].content
        for a, b in replace.items():
            assert a in src, a
            src = src.replace(a, b)
        s = s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})
    return s


def _checks(t):
    return [f.check for f in t.evaluation.findings]


# ------------------------------------------------------------------ 1. the process check
def test_a_child_with_a_blank_command_line_is_still_a_child(tmp_path, solbench_cache):
    """cand_red24_blank_cmdline.py: each call leaves a live child whose /proc cmdline reads
    empty (it unmapped its argv pages). Old code: PASSED, no finding: an empty command line
    was taken for a process that had exited or was a zombie."""
    p = matmul_problem(tmp_path, (128,))
    (t,) = evaluate(p, _cand(p, "cand_red24_blank_cmdline.py"), EvalConfig(device="cpu", iters=6, rounds=2))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings, (ev.log or "")[-800:])
    f = [x for x in ev.findings if x.check == "child_process"]
    assert f, ev.findings
