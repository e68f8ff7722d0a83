"""A reference whose own runs differ (float sums in a varying order: atomics) can miss an
elementwise tolerance with no rtol against itself. Oracle.judge then judges an output that
failed the tolerance alone against fresh runs of the reference on the same inputs
(harness/rounds.py, REFERENCE_RERUNS): the reference's own output passes; a wrong output
still fails; a deterministic reference is run once more at most."""

from __future__ import annotations

import torch

from solbench.harness.rounds import REFERENCE_RERUNS, Oracle
from solbench.inputs import make_inputs
from solbench.spec import load_problem

from harness_helpers import write_problem

#: odd runs add 3e-4 to element 0 (above atol 1e-4), even runs do not: two runs of it differ
#: there as a sum in another order would; ``_n`` counts its runs
TOGGLE = """import torch
_n = [0]

def run(x):
    _n[0] += 1
    y = x * 2.0
    if _n[0] % 2 == 1:
        y.view(-1)[0] += 3e-4
    return y
"""
STEADY = """import torch
_n = [0]

def run(x):
    _n[0] += 1
    return x * 2.0
"""


def _problem(tmp_path, ref: str):
    d = {"name": "twice", "axes": {"n": {"type": "const", "value": 1000}},
         "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
         "outputs": {"y": {"shape": ["n"], "dtype": "float32"}}, "reference": ref}
    return load_problem(write_problem(tmp_path, d, [{
        "uuid": "w0", "axes": {}, "inputs": {"x": {"type": "random"}},
        "tolerance": {"max_atol": 1e-4, "max_rtol": 0.0, "required_matched_ratio": 1.0}}]))


class _Slots:  # what judge reads of the slot pool
    names_out = ["y"]
    out_specs = [((1000,), torch.float32)]


def _runs(oracle: Oracle) -> int:
    return oracle.reference().__globals__["_n"][0]


def _setup(tmp_path, ref):
    # a source of its own per test: a reference module is imported once per source text,
    # and its run counter would carry over
    p = _problem(tmp_path, ref + f"# {tmp_path.name}\n")
    w = p.workloads[0]
    v = make_inputs(p, w, 5, "cpu")
    oracle = Oracle(p, "cpu")
    return oracle, v, w.tolerance_or_default(), v["x"] * 2.0


def test_the_references_own_output_passes_against_another_run(tmp_path):
    oracle, v, tol, exact = _setup(tmp_path, TOGGLE)
    ref_out, _ = oracle.run_observed(v, keep=())  # run 1: element 0 off by 3e-4
    assert (ref_out[0] - exact).abs().max().item() > 1e-4
    rep, _ = oracle.judge([exact.clone()], ref_out, v, tol, _Slots(), False)
    assert rep.passed and rep.reference_reruns == 1 and _runs(oracle) == 2


def test_a_wrong_output_still_fails(tmp_path):
    oracle, v, tol, exact = _setup(tmp_path, TOGGLE)
    ref_out, _ = oracle.run_observed(v, keep=())
    wrong = exact.clone()
    wrong[1] += 1e-3  # off where every run of the reference agrees
    rep, _ = oracle.judge([wrong], ref_out, v, tol, _Slots(), False)
    assert not rep.passed and rep.failed_check == "tolerance" and rep.reference_reruns == 0
    assert _runs(oracle) == 1 + REFERENCE_RERUNS


def test_a_deterministic_reference_is_run_once_more_at_most(tmp_path):
    oracle, v, tol, exact = _setup(tmp_path, STEADY)
    ref_out, _ = oracle.run_observed(v, keep=())
    wrong = exact.clone()
    wrong[0] += 1e-3
    rep, _ = oracle.judge([wrong], ref_out, v, tol, _Slots(), False)
    assert not rep.passed and _runs(oracle) == 2
    # a pass needs no rerun at all
    rep, _ = oracle.judge([exact.clone()], ref_out, v, tol, _Slots(), False)
    assert rep.passed and _runs(oracle) == 2


#: as TOGGLE, and its second run writes the exact answer into the buffer the test hands
#: it (``_late``): the candidate's output buffer written while the parent reruns the
#: reference, as a kernel a candidate left running on the GPU (mapped through CUDA IPC, not
#: stopped by SIGSTOP) could write it
LATE = TOGGLE.replace("    return y\n", "    if _n[0] == 2 and _late:\n        _late[0].copy_(x * 2.0)\n    return y\n") \
    .replace("_n = [0]\n", "_n = [0]\n_late = []\n")


def test_the_rerun_judges_the_output_the_first_check_saw(tmp_path):
    oracle, v, tol, exact = _setup(tmp_path, LATE)
    ref_out, _ = oracle.run_observed(v, keep=())  # run 1: element 0 off by 3e-4
    wrong = exact.clone()
    wrong[1] += 1e-3  # off where every run of the reference agrees
    oracle.reference().__globals__["_late"].append(wrong)  # the late writer's target
    rep, _ = oracle.judge([wrong], ref_out, v, tol, _Slots(), False)
    assert torch.equal(wrong, exact)  # the buffer did change during the rerun
    assert not rep.passed and rep.failed_check == "tolerance" and rep.reference_reruns == 0
