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



def test_a_helper_started_between_blocks_is_new_in_the_next_block(tmp_path, solbench_cache):
    """cand_red24_gap_helper.py: a candidate's thread forks a helper only while the worker runs
    free outside any call (between blocks and phases; past the correctness rounds) and the
    helper lives 0.6 s. Old code: a block's first call took a fresh walk as its baseline, so
    the helper was "old" in every call it lived through: PASSED with the helper alive in 20
    timed calls (when it died before the check after timing; REWARD_HACK only by that check
    otherwise). Now a block's first call (and a warm-up call) compares with the last check's
    walk: ``child_process`` in the call."""
    p = matmul_problem(tmp_path, (256,))
    (t,) = evaluate(p, _cand(p, "cand_red24_gap_helper.py"), EvalConfig(device="cpu", rounds=2, iters=40))
    ev = t.evaluation
    alive = (ev.log or "").count("HELPER ALIVE IN CALL")
    assert alive, ("the helper never lived through a call: inconclusive", ev.status, (ev.log or "")[-800:])
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
    f = [x for x in ev.findings if x.check == "child_process"]
    assert f and ("timed iteration" in f[0].evidence["when"] or "warm-up" in f[0].evidence["when"]), f


# ------------------------------------------------------------------ 2. RLIMIT_DATA after imports
CAP = 512 * MIB


def _rlimit_only(monkeypatch, cap=CAP):
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(cap))
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")


@sandboxed
@pytest.mark.parametrize("mode", ["reserve", "mprotect"])
def test_pages_past_the_cap_within_the_data_limit_are_killed(tmp_path, solbench_cache, monkeypatch, mode):
    """cand_red24_mem_allowance.py holds more than the cap in real private pages while its
    VmData stays within RLIMIT_DATA: by touching the untouched data the allowance was made of
    (cap + allowance in pages), or by making each touched block read-only (RLIMIT_DATA counts
    writable private mappings only: 1.5 limits). The watchdog counts pages: RUNTIME_ERROR,
    ``memory_limit``."""
    _rlimit_only(monkeypatch)
    p = matmul_problem(tmp_path, (32,), tol=1e-3)
    (t,) = evaluate(p, _cand(p, "cand_red24_mem_allowance.py", **{'MODE = "reserve"': f"MODE = {mode!r}"}),
                    EvalConfig(device="cpu", rounds=2, iters=4))
    ev = t.evaluation
    assert ev.status == Status.RUNTIME_ERROR, (ev.status, ev.findings, (ev.log or "")[-1500:])
    f = [x for x in ev.findings if x.check == "memory_limit"]
    assert f and f[0].evidence["cap_bytes"] == CAP < f[0].evidence["held_bytes"], (ev.findings, (ev.log or "")[-1500:])


@sandboxed
def test_honest_untouched_reserve_and_joined_thread_pool_pass(tmp_path, solbench_cache, monkeypatch):
    """cand_red24_honest_reserve_pool.py under the rlimit mechanism: a 256 MiB private mapping
    never touched (made at the candidate's import, after RLIMIT_DATA is set) and a thread pool
    joined in each call, through correctness and the timed calls (the process check with the
    previous call's walk as baseline): PASSED, no finding but advisory timing ones."""
    _rlimit_only(monkeypatch)
    p = matmul_problem(tmp_path, (64, 256), tol=1e-3)
    traces = evaluate(p, _cand(p, "cand_red24_honest_reserve_pool.py"), EvalConfig(device="cpu", rounds=2, iters=8))
    for t in traces:
        ev = t.evaluation
        assert ev.status == Status.PASSED, (ev.status, ev.findings, (ev.log or "")[-1500:])
        assert not [f for f in ev.findings if f.severity != "advisory"], ev.findings
        assert not {"memory_limit", "child_process", "background_thread"} & set(_checks(t)), ev.findings


@sandboxed
@pytest.mark.xfail(strict=True, reason=(
    "hole (false positive, red team 24): RLIMIT_DATA is set before the candidate's import, so "
    "the allowance for untouched data covers only the harness's own; a candidate (or a library "
    "it imports) that reserves more than the cap of private memory it never touches fails its "
    "import with ENOMEM: COMPILE_ERROR with no memory_limit finding, where a cgroup charges "
    "nothing. Setting the limit after the candidate's import would let the candidate inflate "
    "its own allowance (the watchdog would still count pages): a design choice, not a small fix"))
def test_honest_untouched_reserve_past_the_cap(tmp_path, solbench_cache, monkeypatch):
    """The same honest candidate with an untouched mapping of 1.25 caps made at its import:
    under a memory cgroup it holds no page of it and passes."""
    _rlimit_only(monkeypatch)
    p = matmul_problem(tmp_path, (64,), tol=1e-3)
    (t,) = evaluate(p, _cand(p, "cand_red24_honest_reserve_pool.py", **{"RESERVE = 256 << 20": "RESERVE = 640 << 20"}),
                    EvalConfig(device="cpu", rounds=2, iters=4))
    ev = t.evaluation
    assert ev.status == Status.PASSED, (ev.status, ev.findings, (ev.log or "")[-1500:])
