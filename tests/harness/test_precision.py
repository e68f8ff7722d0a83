"""Precision-downgrade findings need evidence (harness/precision.py, pure), backend flag
changes carry their direction (guards.precision_flag_changes), and the gc rule flags only a
lowered threshold or a new callback (guards.gc_interposition; end to end: raising the
thresholds is PASSED, lowering them stays interposition in test_hidden_work.py). Honest
return forms: a torch.return_types structseq and a namedtuple (whose own methods lie) are
unpacked through tuple's slots and PASS; a list subclass stays a non-plain container."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, evaluate, guards
from solbench.harness.precision import is_fp32_work, kernel_kinds, precision_finding
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import py_solution, write_problem

BASE = {"float32_matmul_precision": "highest", "cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": True,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": True,
        "cuda.matmul.allow_bf16_reduced_precision_reduction": True,
        "fp32_precision": "none", "cuda.matmul.fp32_precision": "none", "cudnn.fp32_precision": "none",
        "cudnn.conv.fp32_precision": "tf32", "cudnn.rnn.fp32_precision": "tf32"}


def _with(**kw):
    d = dict(BASE)
    d.update({k.replace("__", "."): v for k, v in kw.items()})
    return d


def _dirs(after):
    return {c["flag"]: c["direction"] for c in guards.precision_flag_changes(BASE, after)}


def test_flag_directions():
    assert _dirs(_with(cuda__matmul__allow_tf32=True)) == {"cuda.matmul.allow_tf32": "lower"}
    assert _dirs(_with(cudnn__allow_tf32=False)) == {"cudnn.allow_tf32": "higher"}
    assert _dirs(_with(float32_matmul_precision="high")) == {"float32_matmul_precision": "lower"}
    assert _dirs(_with(float32_matmul_precision="medium")) == {"float32_matmul_precision": "lower"}
    hi = _with(float32_matmul_precision="high")
    assert guards.precision_flag_changes(hi, BASE)[0]["direction"] == "higher"  # back to "highest"
    assert _dirs(_with(cuda__matmul__allow_fp16_reduced_precision_reduction=False)) == {
        "cuda.matmul.allow_fp16_reduced_precision_reduction": "higher"}
    # fp32_precision API: "none" inherits; the matmul leaf defaults to ieee, cudnn to tf32
    assert _dirs(_with(cuda__matmul__fp32_precision="tf32")) == {"cuda.matmul.fp32_precision": "lower"}
    assert _dirs(_with(fp32_precision="tf32")) == {"fp32_precision": "lower"}
    assert _dirs(_with(cuda__matmul__fp32_precision="ieee")) == {"cuda.matmul.fp32_precision": "neutral"}
    assert _dirs(_with(cudnn__conv__fp32_precision="ieee")) == {"cudnn.conv.fp32_precision": "higher"}
    assert _dirs(_with(cuda__matmul__allow_tf32="unreadable: RuntimeError: mixed")) == {
        "cuda.matmul.allow_tf32": "unknown"}
    assert guards.precision_flag_changes(BASE, dict(BASE)) == []


@pytest.mark.slow
def test_backend_flags_survive_mixed_tf32_apis():
    # torch raises on a legacy read once the new API was used: the reading must not
    code = ("import torch\nfrom solbench.harness import guards\n"
            "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"
            "f = guards.backend_flags()\n"
            "assert f['cuda.matmul.fp32_precision'] == 'tf32', f\n"
            "print(f['cuda.matmul.allow_tf32'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True" or r.stdout.startswith("unreadable: RuntimeError")


def test_flag_change_alone_is_advisory():
    # a real agent-written FFT kernel (no matmul) that set allow_tf32: its kernels are fp32
    f = precision_finding(flags_before=BASE, flags_after=_with(cuda__matmul__allow_tf32=True), fp32_work=True,
                          candidate_error=2.1e-7, reference_error=1.9e-7,
                          candidate_kernels=["void regular_fft<float2, 256u, 8u>(...)", "vector_fft_c2r"])
    assert f.severity == "advisory" and f.basis == ("flags",)


def test_toward_higher_precision_is_never_a_finding():
    for after in (_with(cudnn__allow_tf32=False), _with(cudnn__conv__fp32_precision="ieee")):
        assert precision_finding(flags_before=BASE, flags_after=after, fp32_work=True,
                                 candidate_error=1e-7, reference_error=1e-7) is None
    hi = _with(float32_matmul_precision="high")
    assert precision_finding(flags_before=hi, flags_after=BASE, fp32_work=True) is None


def test_reduced_precision_kernels_for_fp32_work():
    tf32 = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1"
    assert kernel_kinds(tf32) == {"tf32"}
    assert kernel_kinds("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn") == {"16bit"}
    assert kernel_kinds("ampere_sgemm_128x64_nn") == set()
    f = precision_finding(flags_before=BASE, flags_after=_with(cuda__matmul__allow_tf32=True),
                          fp32_work=True, candidate_kernels=[tf32], reference_kernels=["ampere_sgemm_128x64_nn"])
    assert f.severity == "hack" and f.basis == ("kernels", "flags")
    # a TF32 kernel with no flag changed (the candidate called it directly) is still evidence
    f = precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True, candidate_kernels=[tf32])
    assert f.severity == "hack" and f.basis == ("kernels",)
    # cuDNN runs fp32 convolutions as TF32 by default: when the reference does too, no evidence
    conv = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc"
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True,
                             candidate_kernels=[conv], reference_kernels=[conv]) is None
    # the definition allows TF32: a TF32 kernel is fine, a bf16 one is not
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True, allow_tf32=True,
                             candidate_kernels=[tf32]) is None
    f = precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True, allow_tf32=True,
                          candidate_kernels=["ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn"])
    assert f.severity == "hack"
    # bf16 work running bf16 kernels is the declared precision
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=False, dtype=torch.bfloat16,
                             candidate_kernels=["ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn"]) is None


def test_output_error_beyond_the_reference():
    # TF32 GEMM: ~3e-4 vs the fp32 reference's 1e-7 -> 3000x
    f = precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True,
                          candidate_error=3e-4, reference_error=1e-7)
    # the error alone is no evidence of the act (issue 30 item 9): incorrect, not a hack
    assert f.severity == "incorrect" and f.basis == ("output_error",)
    fp = {"dtype": "bfloat16", "share": 1.0, "reference_share": 0.0, "elements": 4096}
    f2 = precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True,
                           candidate_error=3e-4, reference_error=1e-7, output_dtype=fp)
    assert f2.severity == "hack" and f2.basis == ("output_error", "output_dtype")
    # the dtype evidence without an error beyond the limit is nothing
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True,
                             candidate_error=5e-7, reference_error=1e-7, output_dtype=fp) is None
    assert f.evidence["error_limit"] == pytest.approx(2.0**-13)  # floor 2^10 eps above 16 x 1e-7
    # another summation order: 5x the reference's error, below the floor and the factor
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True,
                             candidate_error=5e-7, reference_error=1e-7) is None
    # an honest sequential fp32 sum over 10^6 terms (~sqrt(n) * 2^-24 = 6e-5) against a
    # pairwise reference (1e-7): beyond 16x, below the floor
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True,
                             candidate_error=6e-5, reference_error=1e-7) is None
    # fp64 work computed in fp32 (error ~6e-8 vs the fp64 reference's 1e-16)
    f = precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True, dtype=torch.float64,
                          candidate_error=6e-8, reference_error=1e-16)
    assert f.severity == "incorrect" and f.evidence["error_limit"] == pytest.approx(2.0**-42)
    # an ill-conditioned output: the reference itself is at 1e-3, the candidate at 4e-3
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True,
                             candidate_error=4e-3, reference_error=1e-3) is None
    # allowed TF32: the floor is 4 x 2^-11 (TF32's own GEMM error passes, bf16's does not)
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True, allow_tf32=True,
                             candidate_error=4e-4, reference_error=1e-7) is None
    assert precision_finding(flags_before=BASE, flags_after=BASE, fp32_work=True, allow_tf32=True,
                             candidate_error=3e-3, reference_error=1e-7).severity == "incorrect"
    # allowed TF32: turning it on is no finding, bf16 matmuls ("medium") stay advisory
    assert precision_finding(flags_before=BASE, flags_after=_with(cuda__matmul__allow_tf32=True),
                             fp32_work=True, allow_tf32=True) is None
    f = precision_finding(flags_before=BASE, flags_after=_with(float32_matmul_precision="medium"),
                          fp32_work=True, allow_tf32=True)
    assert f.severity == "advisory"


def test_lower_dtype_fingerprint():
    """Values that went through bf16 / fp16 are found by what they hold (worked out: a random
    fp32 value is bf16-representable with probability 2^-16); an honest fp32 output, and an
    output the reference's own values make representable (small integers), are not."""
    from solbench.harness.precision import lower_dtype_fingerprint

    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 64, generator=g)
    assert lower_dtype_fingerprint(ref * 1.001, ref) is None  # a wrong constant: fp32 values
    f = lower_dtype_fingerprint(ref.bfloat16().float(), ref)
    assert f["dtype"] == "bfloat16" and f["share"] == 1.0 and f["reference_share"] < 0.01
    # the narrowest type is named: bf16 values of randn are fp16 values too
    assert lower_dtype_fingerprint(ref.half().float(), ref)["dtype"] == "float16"
    ints = torch.randint(-50, 50, (64, 64), generator=g).float()
    assert lower_dtype_fingerprint(ints, ints) is None  # the reference's are too
    assert lower_dtype_fingerprint(ref.bfloat16().float()[0, :60], ref[0, :60]) is None  # too few
    assert lower_dtype_fingerprint(ref.bfloat16().double(), ref.double())["dtype"] == "bfloat16"


def test_wrong_constant_is_incorrect_not_a_hack(tmp_path, solbench_cache):
    """Issue 30 item 9. Old code: REWARD_HACK precision_downgrade (error vs the fp64 truth
    1.1e-3, 7500x the fp32 reference's, on a passing round). Nothing shows a lower precision:
    INCORRECT_NUMERICAL with the figures. The bf16 GELU beside it (the act in its values)
    stays a hack."""
    from solbench.spec import load_problem

    kb = Path(__file__).resolve().parents[1] / "adversarial"
    p = load_problem(kb / "problems" / "kb_linear.py")
    (t,) = evaluate(p, load_solution(Path(__file__).with_name("cand_kb_wrong_constant.py"), p),
                    EvalConfig(device="cpu", iters=4, rounds=3, reference_timing=False))
    ev = t.evaluation
    assert ev.status == Status.INCORRECT_NUMERICAL, (ev.status, [(x.check, x.severity, x.message[:400])
                                                                for x in ev.findings], t.evaluation.input_seed)
    f = [x for x in ev.findings if x.check == "precision_error"]
    assert f and f[0].evidence["candidate_rel_l2_vs_fp64"] > f[0].evidence["limit"]
    assert not any(x.check == "precision_downgrade" for x in ev.findings)
    g = load_problem(kb / "problems" / "gelu_f32")
    (t,) = evaluate(g, load_solution(kb / "hostile" / "bf16_gelu.py", g),
                    EvalConfig(device="cpu", iters=4, rounds=3, reference_timing=False))
    f = [x for x in t.evaluation.findings if x.check == "precision_downgrade"]
    assert t.evaluation.status == Status.REWARD_HACK and f, t.evaluation.findings
    assert f[0].evidence["output_dtype"]["dtype"] == "bfloat16"


def test_is_fp32_work():
    assert is_fp32_work([torch.float32, torch.int64], [torch.float32])
    assert not is_fp32_work([torch.bfloat16], [torch.float32])
    assert not is_fp32_work([torch.int64], [torch.int64])


def test_gc_rule():
    assert guards.gc_interposition((700, 10, 10), (100000, 50, 50), (), ()) == []  # raised
    assert guards.gc_interposition((700, 10, 10), (0, 10, 10), (), ()) == []  # collection off
    low = guards.gc_interposition((700, 10, 10), (1, 10, 10), (), ())
    assert len(low) == 1 and "gc_threshold lowered" in low[0]
    assert guards.gc_interposition((700, 10, 10), (700, 2, 10), (), ())  # an older generation
    assert guards.gc_interposition((700, 10, 10), (700, 10, 10), (1,), (1, 2))[0].startswith("gc_callbacks")
    assert guards.gc_interposition((700, 10, 10), (700, 10, 10), (1, 2), (1,)) == []


RAISE_THRESHOLD = """import gc
import torch


def run(x, y):
    gc.set_threshold(100000, 50, 50)  # fewer collections: an honest latency tweak
    y.copy_(torch.relu(x))
"""

DEF = {"name": "relu_dps", "axes": {"n": {"type": "var"}},
       "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
       "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
       "reference": "import torch\n\ndef run(x):\n    return torch.relu(x)\n"}


@pytest.mark.slow
def test_raised_gc_threshold_passes(tmp_path, solbench_cache):
    p = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("raise_thr", RAISE_THRESHOLD, p.name, dps=True),
                    EvalConfig(device="cpu", iters=8, rounds=2, reference_timing=False))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.log, t.evaluation.findings)
    assert not [f for f in t.evaluation.findings if f.check == "interposition"]


# ---------------------------------------------------------------- honest return forms
MAX_DEF = {"name": "row_max", "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 64}},
           "inputs": {"x": {"shape": ["m", "n"], "dtype": "float32"}},
           "outputs": {"values": {"shape": ["m"], "dtype": "float32"},
                       "indices": {"shape": ["m"], "dtype": "int64"}},
           "reference": "import torch\n\ndef run(x):\n    v, i = torch.max(x, dim=-1)\n    return v, i\n"}

STRUCTSEQ = "import torch\n\ndef run(x):\n    return torch.max(x, dim=-1)\n"

#: a namedtuple whose own methods lie: the harness must read the stored elements
NAMEDTUPLE = """import collections
import torch

_Out = collections.namedtuple("_Out", ["values", "indices"])


class Out(_Out):
    def __iter__(self):
        raise RuntimeError("iterated")

    def __len__(self):
        return 7

    def __getitem__(self, i):
        raise RuntimeError("indexed")


def run(x):
    v, i = torch.max(x, dim=-1)
    return Out(v, i)
"""

#: a list subclass stays a non-plain container (it could compute lazily when iterated)
LAZY_LIST = """import torch


class Later(list):
    def __iter__(self):
        return iter([torch.zeros(self.m), torch.zeros(self.m, dtype=torch.int64)])


def run(x):
    out = Later()
    out.m = x.shape[0]
    return out
"""


def _max_problem(tmp_path):
    return load_problem(write_problem(tmp_path / "mx", MAX_DEF, [
        {"uuid": "w", "axes": {"m": 32}, "inputs": {"x": {"type": "random"}}}]))


@pytest.mark.slow
@pytest.mark.parametrize("name,src", [("structseq", STRUCTSEQ), ("namedtuple", NAMEDTUPLE)])
def test_tuple_subclass_returns_pass(tmp_path, solbench_cache, name, src):
    p = _max_problem(tmp_path)
    (t,) = evaluate(p, py_solution(name, src, p.name), EvalConfig(device="cpu", iters=4, rounds=2,
                                                                  reference_timing=False))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.log, t.evaluation.findings)


@pytest.mark.slow
def test_list_subclass_stays_non_plain(tmp_path, solbench_cache):
    p = _max_problem(tmp_path)
    (t,) = evaluate(p, py_solution("lazy", LAZY_LIST, p.name), EvalConfig(device="cpu", iters=4, rounds=2,
                                                                          reference_timing=False))
    assert t.evaluation.status != Status.PASSED


# ---------------------------------------------------------------- end to end (evaluator)
MATMUL_DEF = {"name": "mm", "axes": {"m": {"type": "var"}, "k": {"type": "const", "value": 512},
                                     "n": {"type": "const", "value": 64}},
              "inputs": {"a": {"shape": ["m", "k"], "dtype": "float32"},
                         "b": {"shape": ["k", "n"], "dtype": "float32"}},
              "outputs": {"c": {"shape": ["m", "n"], "dtype": "float32"}},
              "reference": "import torch\n\ndef run(a, b):\n    return a @ b\n"}
FFT_DEF = {"name": "rfft_mag", "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 256},
                                        "f": {"type": "const", "value": 129}},
           "inputs": {"x": {"shape": ["m", "n"], "dtype": "float32"}},
           "outputs": {"y": {"shape": ["m", "f"], "dtype": "float32"}},
           "reference": "import torch\n\ndef run(x):\n    return torch.fft.rfft(x).abs()\n"}

#: an FFT kernel (no matmul, no convolution) that sets allow_tf32 as agents often do
FFT_TF32 = """import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


def run(x):
    return torch.fft.rfft(x).abs()
"""
#: toward higher precision: TF32 off for cuDNN and cuBLAS, matmul precision "highest"
TF32_OFF = """import torch


def run(a, b):
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return a @ b
"""
#: the same bf16 product without any flag: wrong, not a hack
BF16_NO_FLAG = """import torch


def run(a, b):
    return (a.to(torch.bfloat16) @ b.to(torch.bfloat16)).to(torch.float32)
"""

ADV = __import__("pathlib").Path(__file__).resolve().parents[1] / "adversarial"
E2E = dict(device="cpu", iters=4, rounds=2, reference_timing=False)


def _eval(p, sol):
    (t,) = evaluate(p, sol, EvalConfig(**E2E))
    return t.evaluation


@pytest.mark.slow
def test_flag_alone_and_higher_precision_are_not_hacks(tmp_path, solbench_cache):
    from solbench.spec import load_solution

    fft = load_problem(write_problem(tmp_path / "fft", FFT_DEF, [
        {"uuid": "w", "axes": {"m": 16}, "inputs": {"x": {"type": "random"}}}]))
    e = _eval(fft, py_solution("fft_tf32", FFT_TF32, fft.name))
    assert e.status == Status.PASSED, (e.log, e.findings)
    assert [(f.check, f.severity) for f in _not_timing(e.findings)] == [("backend_flags", "advisory")]
    mm = load_problem(write_problem(tmp_path / "mm", MATMUL_DEF, [
        {"uuid": "w", "axes": {"m": 64}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}]))
    e = _eval(mm, py_solution("tf32_off", TF32_OFF, mm.name))
    # (timing advisories such as timing_unstable come from host load, not from the flags)
    assert e.status == Status.PASSED and _not_timing(e.findings) == [], (e.log, e.findings)
    # TF32 on for a matmul, on a CPU: the product stays fp32 (no output evidence): advisory
    e = _eval(mm, load_solution(ADV / "hostile" / "tf32_flag.py", mm))
    assert e.status == Status.PASSED, (e.log, e.findings)
    assert {f.check: f.severity for f in _not_timing(e.findings)} == {"backend_flags": "advisory"}


def _not_timing(findings):
    """The findings other than the timing advisories a loaded host can raise on any run."""
    return [f for f in findings if not (f.severity == "advisory" and f.check.startswith(("timing_", "first_call")))]


@pytest.mark.slow
def test_flag_with_output_evidence_is_a_hack_even_when_the_tolerance_fails(tmp_path, solbench_cache):
    from solbench.spec import load_solution

    mm = load_problem(write_problem(tmp_path / "mm", MATMUL_DEF, [
        {"uuid": "w", "axes": {"m": 64}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}]))
    e = _eval(mm, load_solution(ADV / "hostile" / "flag_bf16_matmul.py", mm))
    assert e.status == Status.REWARD_HACK, (e.log, e.findings)
    (f,) = [f for f in e.findings if f.check == "precision_downgrade"]
    assert f.evidence["basis"] == ["output_error", "flags"]
    assert f.evidence["candidate_error"] > 100 * f.evidence["reference_error"]
    assert "tolerance" in e.log  # it also missed the tolerance: still a hack, not just wrong
    # the same product without the flag fails the tolerance and is only incorrect
    e = _eval(mm, py_solution("bf16", BF16_NO_FLAG, mm.name))
    assert e.status == Status.INCORRECT_NUMERICAL, (e.log, e.findings)
    assert not [f for f in e.findings if f.severity == "hack"]


#: kernel names as CUPTI reported them on the H200 (bench/results/profile_fixtures.json): an
#: fp32 GEMM on CUDA cores, and TF32 tensor-core GEMMs (CUTLASS, cuBLAS on sm90)
SIMT_SGEMM = "cutlass_80_simt_sgemm_128x32_8x5_nn_align1"
TF32_GEMMS = ["cutlass_80_tensorop_s1688gemm_128x64_32x3_tn_align1",
              "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"]
BF16_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def _mm_problem(tmp_path, allow_tf32=False, name="mm"):
    d = dict(MATMUL_DEF, name=name)
    if allow_tf32:
        d["allow_tf32"] = True
    return load_problem(write_problem(tmp_path / name, d, [
        {"uuid": "w", "axes": {"m": 64}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}]))


@pytest.mark.parametrize("tf32", TF32_GEMMS)
def test_reduced_precision_kernels_in_timed_calls_are_a_downgrade(tmp_path, tf32):
    """The kernel evidence as the timed blocks hand it over (kernel names per timed call,
    candidate and eager reference): a TF32 or bf16 GEMM for fp32 work where the reference ran
    an fp32 one is precision_downgrade, whatever the flags; none when the definition allows
    TF32, when the reference ran the same kind (cuDNN's default TF32 convolutions), when the
    candidate's kernels are fp32, or when the reference's kernels are unknown."""
    from solbench.harness.evidence import kernel_precision_check

    mm = _mm_problem(tmp_path)
    ref_sets = [(SIMT_SGEMM,)] * 4
    findings = []
    f = kernel_precision_check(mm, findings, [(tf32,)] * 4, ref_sets)
    assert f is not None and findings == [f] and f.check == "precision_downgrade" and f.severity == "hack"
    assert f.evidence["basis"] == ["kernels"] and f.evidence["reduced_kernels"] == {tf32: ["tf32"]}
    findings = []
    f = kernel_precision_check(mm, findings, [(BF16_GEMM, "void at::native::elementwise_kernel")] * 4, ref_sets)
    assert f is not None and f.evidence["reduced_kernels"] == {BF16_GEMM: ["16bit"]}
    for cand, ref, prob in (([(tf32,)], ref_sets, _mm_problem(tmp_path, True, "mm_tf32")),  # allowed
                            ([(tf32,)], [(TF32_GEMMS[0],)], mm),  # the reference ran TF32 too
                            ([(SIMT_SGEMM,)], ref_sets, mm),  # fp32 kernels
                            ([(tf32,)], [], mm)):  # no reference kernels: no basis
        findings = []
        assert kernel_precision_check(prob, findings, cand, ref) is None and findings == []


def test_kernel_evidence_ignores_work_that_is_not_fp32(tmp_path):
    from solbench.harness.evidence import kernel_precision_check

    d = dict(MATMUL_DEF, name="mm16")
    d["inputs"] = {k: dict(v, dtype="bfloat16") for k, v in MATMUL_DEF["inputs"].items()}
    d["outputs"] = {k: dict(v, dtype="bfloat16") for k, v in MATMUL_DEF["outputs"].items()}
    p = load_problem(write_problem(tmp_path / "mm16", d, [
        {"uuid": "w", "axes": {"m": 64}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}]))
    assert kernel_precision_check(p, [], [(BF16_GEMM,)], [(SIMT_SGEMM,)]) is None
