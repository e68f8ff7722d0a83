"""Timed-iteration verification applies the same limits as the correctness rounds.

The problem sums 8192 float32 values per row around a +-16 alternating offset, so the
float32 reference's own error against an fp64 truth is far above 4 float32 eps; a candidate
that sums in float64 (more accurate, and different from the reference by about the
reference's own error) passes the correctness rounds through the fp64-truth allowance and
must pass the verified timed iterations the same way (it failed them, as
``timed_output_mismatch`` REWARD_HACK, before those checks used the allowance: the same
failure DLRM-Bench dlrm04's own reference hit on the H200, whose index_add_ sums in a
nondeterministic order).
"""

import torch

from solbench.harness import EvalConfig, evaluate
from solbench.harness.correctness import rel_l2
from solbench.spec import Status, load_problem

from harness_helpers import py_solution, write_problem

REF = """import torch

def run(x):
    alt = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    alt[1::2] = -1
    return ((x + 16.0 * alt) * 1.0).sum(dim=-1, keepdim=True)
"""

CAND = """import torch

def run(x):
    alt = torch.ones(x.shape[-1], dtype=torch.float64, device=x.device)
    alt[1::2] = -1
    return (x.double() + 16.0 * alt).sum(dim=-1, keepdim=True).float()
"""

DEF = {
    "name": "offset_row_sum",
    "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 8192}},
    "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["rows", 1], "dtype": "float32"}},
    "reference": REF,
}


def test_reference_error_is_above_four_eps():
    """The premise, by an independent computation: the fp32 reference is off its fp64 truth
    by much more than 4 eps(fp32) = 4.8e-7, so the plain limit would fail the fp64 candidate."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8192, generator=g)
    alt = torch.ones(8192)
    alt[1::2] = -1
    ref = (x + 16.0 * alt).sum(dim=-1, keepdim=True)
    truth = (x.double() + 16.0 * alt.double()).sum(dim=-1, keepdim=True)
    assert rel_l2(ref.double(), truth) > 4 * 2.0 ** -23 * 4


def test_more_accurate_candidate_passes_timed_verification(tmp_path, solbench_cache):
    prob = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w64", "axes": {"rows": 64}, "inputs": {"x": {"type": "random"}},
         # rtol 0, as DLRM-Bench dlrm04's float output: the scale-invariant limit is then
         # max(4 eps, 8 e_ref), and only the fp64-truth allowance admits the fp64 candidate
         "tolerance": {"max_atol": 0.05, "max_rtol": 0.0, "required_matched_ratio": 1.0}}]))
    cfg = EvalConfig(device="cpu", rounds=3, iters=6, warmup=1, verify=6,
                     reference_timing=False, build_timeout_s=120.0)
    (t,) = evaluate(prob, py_solution("fp64_sum", CAND, prob.name), cfg)
    ev = t.evaluation
    hacks = [f for f in ev.findings if f.severity == "hack"]
    assert ev.status == Status.PASSED, (ev.log, hacks)
    assert not hacks
