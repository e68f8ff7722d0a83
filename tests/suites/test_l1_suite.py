"""The l1 suite: coverage of KernelBench level 1's ground, committed data equal to what
build_l1.py generates, and per problem: the reference runs on each cpu workload with the
declared shapes, no trivial candidate passes, an honest fp64 candidate passes."""

import filecmp
import importlib
from pathlib import Path

import pytest
import torch

from solbench.spec import load_problem
from solbench.suites import DATA_ROOT, suite_problems
from solbench.suites import build_l1
from solbench.suites.check import check_workload, make_workload_inputs

L1 = suite_problems("l1")
NAMES = {p.name for p in L1}

#: the issue's list of ground to cover -> problem names that cover it
REQUIRED = {
    "matmul square": ["matmul_square_fp32", "matmul_square_bf16"],
    "matmul tall-skinny": ["matmul_tall_skinny_fp32"],
    "matmul batched": ["matmul_batched_fp32", "matmul_batched_bf16"],
    "matvec": ["matvec_fp32", "matvec_bf16"],
    "3-D tensor x matrix": ["matmul_3d_tensor_matrix_fp32", "matmul_3d_tensor_matrix_bf16"],
    "diagonal scaling": ["matmul_diag_scale_fp32"],
    "triangular": ["matmul_triangular_lower_fp32", "matmul_triangular_upper_fp32"],
    "ReLU family": ["relu_fp32", "relu_bf16", "leaky_relu_fp32", "elu_fp32", "selu_fp32"],
    "GELU": ["gelu_fp32", "gelu_bf16", "gelu_tanh_fp32"],
    "SiLU": ["silu_fp32", "silu_bf16"],
    "softplus": ["softplus_fp32"],
    "hard variants": ["hardtanh_fp32", "hardsigmoid_fp32", "hardswish_fp32"],
    "softmax": ["softmax_fp32", "softmax_bf16"],
    "log-softmax": ["log_softmax_fp32"],
    "batch norm": ["batch_norm_fp32"], "layer norm": ["layer_norm_fp32", "layer_norm_bf16"],
    "group norm": ["group_norm_fp32"], "instance norm": ["instance_norm_fp32"],
    "RMS norm": ["rms_norm_fp32", "rms_norm_bf16"],
    "L1/L2/Frobenius": ["l1_norm_fp32", "l2_norm_fp32", "frobenius_norm_fp32"],
    "max pool 1/2/3-D": ["max_pool1d_fp32", "max_pool2d_fp32", "max_pool3d_fp32"],
    "avg pool 1/2/3-D": ["avg_pool1d_fp32", "avg_pool2d_fp32", "avg_pool3d_fp32"],
    "reductions": ["sum_dim1_fp32", "mean_dim_fp32", "max_dim_fp32", "min_dim_fp32",
                   "argmax_dim_fp32", "argmin_dim_fp32", "prod_dim_fp32"],
    "conv 2-D/3-D standard": ["conv2d_3x3_fp32", "conv2d_3x3_bf16", "conv3d_3x3x3_fp32"],
    "conv depthwise/pointwise/dilated/strided": [
        "conv2d_depthwise_fp32", "conv2d_pointwise_fp32", "conv2d_dilated_fp32",
        "conv2d_strided_7x7_fp32"],
    "conv transposed": ["conv_transpose2d_fp32", "conv_transpose3d_fp32"],
    "scans": ["cumsum_fp32", "cumprod_fp32", "cumsum_reverse_fp32", "cumsum_exclusive_fp32",
              "cumsum_masked_fp32"],
    "losses": ["cross_entropy_fp32", "cross_entropy_bf16", "mse_loss_fp32", "huber_loss_fp32",
               "kl_div_fp32", "triplet_margin_loss_fp32", "hinge_loss_fp32",
               "cosine_embedding_loss_fp32"],
}


def test_coverage_and_size():
    assert len(L1) >= 55
    missing = {k: [n for n in v if n not in NAMES] for k, v in REQUIRED.items()}
    assert not any(missing.values()), missing


def test_committed_data_is_what_the_script_generates(tmp_path):
    out = tmp_path / "l1"
    build_l1.write(out)
    cmp = filecmp.dircmp(out, DATA_ROOT / "l1")
    assert not cmp.left_only and not cmp.right_only, (cmp.left_only, cmp.right_only)
    for name in cmp.common_dirs:
        for f in ("definition.json", "workload.jsonl"):
            assert (out / name / f).read_bytes() == (DATA_ROOT / "l1" / name / f).read_bytes(), \
                f"{name}/{f} differs from build_l1.py output: rerun python -m solbench.suites.build_l1"


def test_workload_shape_of_each_problem():
    for p in L1:
        prob = load_problem(p)
        assert len(prob.workloads) >= 3, p.name
        assert sum("cpu" in (w.tags or []) for w in prob.workloads) >= 1, p.name
        assert prob.definition.custom_inputs_entrypoint == "make_inputs"
        for w in prob.workloads:
            tol = w.tolerance
            assert tol is not None and tol.max_rtol <= 2e-2 and tol.max_atol <= 2e-2, (p.name, tol)


@pytest.mark.parametrize("path", L1, ids=[p.name for p in L1])
def test_cpu_workloads_reference_and_screen(path):
    prob = load_problem(path)
    for w in prob.workloads:
        if "cpu" not in (w.tags or []):
            continue
        r = check_workload(prob, w, seed=1)
        assert r.shapes_ok and not r.errors, r.errors
        assert not r.passing_trivial, f"trivial candidates pass: {r.passing_trivial} {r.trivial_ratios}"
        assert r.honest_ok, f"fp64-computed candidate fails the tolerance ({r.honest_ratio})"
        # the worst trivial candidate stays far from the required matched ratio
        assert max(r.trivial_ratios.values()) < 0.9 * w.tolerance_or_default().required_matched_ratio


def test_inputs_fresh_per_seed_and_deterministic():
    prob = load_problem(DATA_ROOT / "l1" / "layer_norm_fp32")
    w = next(w for w in prob.workloads if "cpu" in (w.tags or []))
    a = make_workload_inputs(prob, w, seed=3)["x"]
    b = make_workload_inputs(prob, w, seed=3)["x"]
    c = make_workload_inputs(prob, w, seed=4)["x"]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_every_workload_builds_on_meta():
    """Inputs of GPU-sized workloads have the declared shapes/dtypes (meta: no memory)."""
    for p in L1:
        prob = load_problem(p)
        defn = prob.definition
        for w in prob.workloads:
            env = defn.resolve_axes(w.axes)
            got = make_workload_inputs(prob, w, device="meta")
            for k, spec in defn.inputs.items():
                assert tuple(got[k].shape) == defn.shape_of(spec, env), (p.name, k)
                assert got[k].dtype == getattr(torch, spec.dtype), (p.name, k)


def _integrity_screen():
    try:
        screen = importlib.import_module("solbench.integrity.screen")
        importlib.import_module("solbench.harness.correctness")
    except ImportError as e:
        pytest.skip(f"solbench.integrity.screen not usable yet ({e})")
    return screen


def test_no_l1_problem_is_degenerate():
    """The product's trivial-candidate screen (solbench.integrity.screen) on every cpu
    workload of every l1 problem."""
    screen = _integrity_screen()
    bad = {}
    for p in L1:
        res = screen.screen_problem(load_problem(p), device="cpu", cpu_tagged_only=True,
                                    downgrade=False)
        assert res.screened_workloads, f"{p.name}: nothing screened ({res.skipped})"
        if res.degenerate:
            bad[p.name] = res.reasons
    assert not bad, bad
