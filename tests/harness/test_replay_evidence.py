"""cached_output evidence added after issue 30's red team (harness/replay.py): a returned float
output mostly the worker's poison (a cached tensor with a few elements recomputed), and the
re-check after the timed loop on the last timed set of slot 0 with a few signs flipped (a
cache keyed on some of the inputs' values hands back that call's answer). Honest kernels,
memoisation keyed on every value and workspaces keyed on shape included, pass."""

import secrets
from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, evaluate
from solbench.harness.correctness import POISON_BYTE
from solbench.harness.replay import PERTURB_SHARE, ReplayWatch, perturbable_inputs, perturbed
from solbench.spec import Status

from harness_helpers import matmul_problem, py_solution, relu_problem

CFG = dict(device="cpu", iters=8, rounds=3, reference_timing=False)


def _poisoned(t: torch.Tensor, n: int) -> torch.Tensor:
    """``t`` with its first ``n`` elements set to the poison byte pattern."""
    t = t.clone()
    t.reshape(-1)[:n].view(torch.uint8).fill_(POISON_BYTE)
    return t


def test_mostly_poisoned_float_output_is_mostly_unwritten():
    w = ReplayWatch()
    w.passed_call("round 0", [torch.randn(10, 10)])
    findings = []
    f = w.failed_call("round 1", [_poisoned(torch.randn(10, 10), 99)], findings, returned=True)
    assert f is not None and f.evidence["kind"] == "mostly_unwritten"
    assert f.evidence["poisoned_share"] == {"0": pytest.approx(0.99)}


@pytest.mark.parametrize("out, n", [
    (torch.randn(10, 10), 40),  # under half poisoned: a partial write, no act shown
    (torch.randint(0, 100, (10, 10), dtype=torch.int32), 90),  # -1 is an ordinary int value
])
def test_partly_poisoned_or_integer_output_names_no_act(out, n):
    w = ReplayWatch()
    w.passed_call("round 0", [out.clone()])
    assert w.failed_call("round 1", [_poisoned(out, n)], [], returned=True) is None


def test_no_passing_call_before_names_no_act():
    # a kernel that never wrote its whole output (a launch bug) reads the same from its first call
    assert ReplayWatch().failed_call("round 0", [_poisoned(torch.randn(10, 10), 99)], [], returned=True) is None


def test_perturbed_flips_the_signs_of_a_few_values_and_leaves_the_set_alone():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    values = {"a": a, "b": b, "k": 3}
    new, changed = perturbed(values, ["a"], secrets.randbits(63))
    n = 256 * 256 * PERTURB_SHARE  # 16 positions drawn (with replacement: at most 16 distinct)
    assert n == 16 and 1 <= changed["a"] <= 16 and list(changed) == ["a"]
    d = new["a"] != a
    assert int(d.sum()) == changed["a"] and torch.equal(new["a"][d], -a[d])
    assert new["b"] is b and new["k"] == 3 and values["a"] is a  # the set given is not written
    again, _ = perturbed(values, ["a"], 5)
    assert torch.equal(again["a"], perturbed(values, ["a"], 5)[0]["a"])  # a seed rebuilds the set


def test_only_plain_float_data_is_perturbable(tmp_path):
    p = matmul_problem(tmp_path, (64,))
    assert perturbable_inputs(p, p.workloads[0]) == ["a", "b"]
    assert perturbable_inputs(p, p.workloads[0], skip=["a"]) == ["b"]
    assert perturbed({"i": torch.arange(10)}, ["i"], 1) is None  # no float: nothing


FULL_KEY = '''import hashlib
import torch

_cache = {}


def run(a, b):
    # memoisation keyed on every byte of the inputs: right whenever it hits
    k = hashlib.sha256(a.numpy().tobytes() + b.numpy().tobytes()).hexdigest()
    if k not in _cache:
        _cache[k] = a @ b
    return _cache[k].clone()
'''

SHAPE_WORKSPACE = '''import torch

_ws = {}


def run(a, b):
    # a workspace keyed on shape and dtype, rewritten whole by every call (a plan cache)
    key = (tuple(a.shape), tuple(b.shape), a.dtype)
    out = _ws.get(key)
    if out is None:
        out = _ws[key] = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    torch.matmul(a, b, out=out)
    return out
'''

PURE = "import torch\n\ndef run(a, b):\n    return torch.matmul(a, b)\n"


@pytest.mark.parametrize("name, src", [("full_key", FULL_KEY), ("shape_workspace", SHAPE_WORKSPACE),
                                       ("pure", PURE)])
def test_honest_caches_and_pure_kernels_pass_the_perturbed_recheck(tmp_path, solbench_cache, name, src):
    p = matmul_problem(tmp_path, (128,))
    (t,) = evaluate(p, py_solution(name, src, "mm"), EvalConfig(**CFG))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)


def test_value_cache_on_a_dps_kernel_is_cached_output(tmp_path, solbench_cache):
    """The value-keyed cache of cand_value_cache.py in destination-passing style: it copies
    the stored answer into the output buffer (the buffer is written, by a copy)."""
    src = '''import torch

_cache = {}


def run(a, b, c):
    fa, fb = a.reshape(-1), b.reshape(-1)
    k = (float(fa[0]), float(fa[-1]), float(fb[fb.numel() // 2]))
    if k not in _cache:
        _cache[k] = a @ b
    c.copy_(_cache[k])
'''
    p = matmul_problem(tmp_path, (256,))
    (t,) = evaluate(p, py_solution("vc_dps", src, "mm", dps=True), EvalConfig(**CFG))
    f = [x for x in t.evaluation.findings if x.check == "cached_output"]
    assert t.evaluation.status == Status.REWARD_HACK and f, (t.evaluation.status, t.evaluation.findings)
    assert f[0].evidence["kind"] == "replayed" and f[0].evidence["input_set"]["sign_flipped"], f[0].evidence


def test_relu_honest_passes(tmp_path, solbench_cache):
    # an output that does not depend on most flipped values' magnitudes (relu zeros) is judged as usual
    p = relu_problem(tmp_path, (4096,))
    (t,) = evaluate(p, py_solution("relu", "import torch\n\ndef run(x):\n    return torch.relu(x)\n", "relu"),
                    EvalConfig(**CFG))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)
