"""Issue 30's closing red team on the CPU (docs/threats.md, "Red team of issue 30"): the holes
it found, each a real hostile candidate, now closed: an identity cache that recomputes one
element (``mostly_unwritten``), an output cache keyed on sampled values (the perturbed
re-check after timing), a forged flag baseline, and rewritten flag readers (harness/flagread.py).
The attempts the defences held against are listed in the doc's table."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status, load_solution

from harness_helpers import bf16_matmul_here, matmul_problem

HERE = Path(__file__).resolve().parent
CFG = dict(device="cpu", iters=8, rounds=3, reference_timing=False)


def _one(tmp_path, cand, size=128, tol=1e-3):
    p = matmul_problem(tmp_path, (size,), tol=tol)
    (t,) = evaluate(p, load_solution(HERE / cand, p), EvalConfig(**CFG))
    return t.evaluation


def test_identity_cache_that_rewrites_one_element_is_cached_output(tmp_path, solbench_cache):
    """Old code: INCORRECT_NUMERICAL (write_coverage 0.0061%: the cached tensor, poisoned by
    the worker after the earlier call's copy-out, with one element recomputed). Now the
    poisoned share names the act."""
    ev = _one(tmp_path, "cand_cache_one_element.py")
    f = [x for x in ev.findings if x.check == "cached_output"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.log)
    # 1 of 128 x 128 elements written: the rest (16383 / 16384) is the worker's poison
    assert f[0].evidence["kind"] == "mostly_unwritten", f[0].evidence
    assert f[0].evidence["poisoned_share"]["0"] == pytest.approx(16383 / 16384), f[0].evidence


def test_value_keyed_cache_is_cached_output(tmp_path, solbench_cache):
    ev = _one(tmp_path, "cand_value_cache.py", size=256)
    assert ev.status == Status.REWARD_HACK and any(f.check == "cached_output" for f in ev.findings), \
        (ev.status, [f.check for f in ev.findings])


def test_forged_flag_baseline_is_still_a_precision_downgrade(tmp_path, solbench_cache):
    """Old code: INCORRECT_NUMERICAL with no flag named (the parent compared the worker's
    reply against the worker's own, rewritten, ``flags0``). Now the parent keeps the flags the
    worker listed before the build, and the downgrade is named with the flag."""
    ev = _one(tmp_path, "cand_flags_forge.py", size=256, tol=1e-4)
    assert ev.status == Status.REWARD_HACK and any(
        "allow_tf32" in f.message or f.check == "backend_flags" for f in ev.findings), \
        (ev.status, [(f.check, f.message[:120]) for f in ev.findings])


@pytest.mark.skipif(not bf16_matmul_here(), reason="this CPU has no bf16 matmul path: precision "
                    "'medium' leaves the candidate's matmul in fp32, so there is no downgrade to show "
                    "(the candidate PASSES with the advisory backend_flags, rightly)")
def test_rewritten_flag_readers_still_show_the_precision_downgrade(tmp_path, solbench_cache):
    """Old code: INCORRECT_NUMERICAL with no flag named (the worker read the flags through a
    dict of Python readers and the torch getters, all rebound by the candidate). Now the
    worker reads through C getters bound before any candidate code (harness/flagread.py).
    Needs a CPU whose oneDNN runs fp32 matmuls on bf16 under precision "medium" (AMX /
    AVX512-BF16; this AMD EPYC host has neither)."""
    ev = _one(tmp_path, "cand_flag_readers.py", size=256, tol=1e-4)
    assert ev.status == Status.REWARD_HACK and any(
        "allow_tf32" in f.message or "float32_matmul_precision" in f.message for f in ev.findings), \
        (ev.status, [(f.check, f.message[:120]) for f in ev.findings])


def test_replaced_flag_reader_defaults_are_a_harness_patch(tmp_path, solbench_cache):
    """The bound readers live in the reader's defaults tuple: replacing it is seen (the
    parent's read of the worker's memory and the worker's snapshot), and the downgrade is
    still named where the patch would be missed."""
    ev = _one(tmp_path, "cand_flag_defaults.py", size=256, tol=1e-4)
    assert ev.status == Status.REWARD_HACK, (ev.status, [(f.check, f.message[:120]) for f in ev.findings])
    assert any("backend_flags" in f.message and f.check in ("harness_patch", "guard_reply_invalid")
               for f in ev.findings), [(f.check, f.message[:160]) for f in ev.findings]
