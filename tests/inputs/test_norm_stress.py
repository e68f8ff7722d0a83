"""The normalisation stress set always holds a row that a one-pass variance cannot normalise.

E[x^2] - E[x]^2 in float32 cancels on a row offset by hundreds with a small spread: at an
offset of 1000, E[x^2] is about 1e6, whose float32 spacing (0.0625) swamps a variance of
0.01-0.03 (a spread of 0.1-0.16). With offsets and spreads both drawn at random, about 2% of
the sets held no such row and a one-pass layer norm passed the round. Judged here against an
fp64 layer norm with the corpus problem's tolerance (1e-2 absolute and relative, 99% of the
elements matched)."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from solbench.inputs.generate import NORM_RATIO, _stress_values, make_inputs
from solbench.spec import load_problem

L1 = Path(__file__).resolve().parents[2] / "src" / "solbench" / "suites" / "data" / "l1"


def _fails(out: torch.Tensor, truth: torch.Tensor, tol: float = 1e-2, ratio: float = 0.99) -> bool:
    bad = (out.double() - truth).abs() > tol + tol * truth.abs()
    return bad.float().mean().item() > 1 - ratio


def _one_pass(x, w=None, b=None):
    mean = x.mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(((x * x).mean(-1, keepdim=True) - mean * mean).clamp_min(0) + 1e-5)
    return y if w is None else y * w + b


def test_one_pass_variance_fails_every_norm_stress_set():
    """At 1e-2 (the corpus problem's tolerance) the one-pass variance may escape a set whose
    offset rows all rounded kindly: measured 0 of 200 sets of 32 x 256 (seeds 0-199), 1 of
    the 200 below (seed 163); at 1e-3 none."""
    escaped = []
    for seed in range(200):
        g = torch.Generator().manual_seed(seed)
        x = _stress_values("norm", (32, 256), g, "cpu")
        truth = torch.nn.functional.layer_norm(x.double(), (256,))
        mean = x.mean(-1, keepdim=True)
        one_pass = _one_pass(x)
        centred = x - mean
        two_pass = centred / torch.sqrt((centred * centred).mean(-1, keepdim=True) + 1e-5)
        if not _fails(one_pass, truth):
            escaped.append(seed)
        assert _fails(one_pass, truth, 1e-3), seed
        # the honest two-pass form and torch's own stay within the tolerance on the same set
        assert not _fails(two_pass, truth), seed
        assert not _fails(torch.nn.functional.layer_norm(x, (256,)), truth), seed
    assert len(escaped) <= 2, escaped


def test_torch_layer_norm_holds_a_tight_tolerance_on_the_stress_rows():
    """Every offset row's offset / spread is in NORM_RATIO (550-720), where float32 two-pass
    error (R x 2^-24, about 4e-5) is under 1e-4 and the one-pass error (R^2 x 2^-24, 2-3% of
    the variance) is not: torch's float32 layer norm meets 1e-4 on every set of these 100
    (measured 0 of 200), the one-pass misses 1e-3 on every set. Before, a spread drawn apart from the offset gave rows of
    R up to 10^4, and the largest-offset row was made R 6000-10000 on purpose: torch missed
    1e-4 on such rows."""
    lo, hi = NORM_RATIO
    for seed in range(100):
        g = torch.Generator().manual_seed(seed)
        x = _stress_values("norm", (16, 256), g, "cpu")
        off_rows = x.mean(-1).abs() > 50
        r = x.mean(-1).abs() / x.std(-1)
        assert bool(off_rows.any()), seed
        assert bool(((r[off_rows] > 0.9 * lo) & (r[off_rows] < 1.1 * hi)).all()), (seed, r[off_rows])
        truth = F.layer_norm(x.double(), (256,))
        assert not _fails(F.layer_norm(x, (256,)), truth, 1e-4), seed
        assert _fails(_one_pass(x), truth, 1e-3), seed


def test_a_normalisation_vector_is_not_stressed():
    """A normalisation's 1-D input (its affine weight or bias over the normalised dimension)
    is drawn as upstream's randn in the stress set, not offset by hundreds."""
    g = torch.Generator().manual_seed(0)
    w = _stress_values("norm", (4096,), g, "cpu")
    assert w.abs().max().item() < 7 and abs(w.mean().item()) < 0.1 and 0.9 < w.std().item() < 1.1


@pytest.mark.skipif(not (L1 / "layer_norm_fp32").is_dir(), reason="l1 suite data absent")
def test_l1_layer_norm_stress_round_is_judged_and_fails_a_one_pass_variance():
    """The bundled l1/layer_norm_fp32 (custom inputs x, gamma, beta; tolerance 1e-4, 99% of
    the elements) on its 16 x 256 workload. Before: the float32 reference (torch's layer
    norm) missed the fp64 truth on 67 of 100 stress sets (gamma and beta offset by hundreds,
    and rows of offset / spread up to 10^4), each such round was dropped, and a one-pass
    layer norm PASSED 11 of 12 evaluations. Now the reference meets the truth on every set
    and the one-pass misses it on every one."""
    p = load_problem(L1 / "layer_norm_fp32")
    w = p.workloads[0]
    tol = w.tolerance
    for seed in range(100):
        v = make_inputs(p, w, seed, "cpu", profile="stress")
        x, g, b = v["x"], v["gamma"], v["beta"]
        truth = F.layer_norm(x.double(), (x.shape[-1],), g.double(), b.double(), eps=1e-5)
        ref = F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)
        assert not _fails(ref, truth, tol.max_atol, tol.required_matched_ratio), seed
        assert _fails(_one_pass(x, g, b), truth, tol.max_atol, tol.required_matched_ratio), seed
