"""The reference of representative SOL-ExecBench dev problems, evaluated as the candidate on
its smallest CPU-sized workload, PASSES (all four subsets; problems whose reference needs
CUDA, e.g. the nvfp4 Quant problems through torch._scaled_mm, are left out). A FlashInfer
workload whose safetensors blob is absent ends as INVALID_REFERENCE naming the blob."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status, load_problem, reference_solution
from solbench.spec.workload import SafetensorsInput

DEV = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "sol-execbench-dev"
needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason=f"dev dataset not found at {DEV}")

#: CPU-runnable, small smallest-workloads; 061 and its 0-d bf16 outputs guard the poisoning of
#: scalar outputs, 005 covers fp8 inputs, 043 bf16 reductions, 041 conv, 049 matmul
REPRESENTATIVE = [
    "FlashInfer-Bench/024_rmsnorm_h2048",
    "FlashInfer-Bench/004_gemm_n128_k2048",
    "L1/041_strided_conv2d_downsampling",
    "L1/049_attention_qk_matmul_with_gqa_repeat_and_scaling",
    "L1/061_tanh_gated_residual_add_backward",
    "L1/069_rms_norm",
    "L2/035_convnextv2_block_with_grn",
    "L2/043_mamba_chunk_scan_with_segsum",
    "Quant/005_fp8_moe_router_projection",
]
MAX_BYTES = 8 << 20


@needs_dev
@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_reference_as_candidate_passes(name, solbench_cache):
    prob = load_problem(DEV / name)
    (w,) = prob.smallest_workloads(1, max_bytes=MAX_BYTES)
    cfg = EvalConfig(device="cpu", rounds=5, timing=False, workloads=[w.uuid])
    (t,) = evaluate(prob, reference_solution(prob), cfg)
    ev = t.evaluation
    assert ev.status == Status.PASSED, ev.log
    assert t.workload.uuid == w.uuid
    # the same code on the same inputs and device: bit-identical outputs, fully written
    assert ev.correctness.max_absolute_error == 0.0
    assert ev.correctness.extra["write_coverage"] == 1.0 and ev.correctness.extra["rounds"] == 5
    assert not any(f.severity == "hack" for f in ev.findings)


@needs_dev
def test_missing_blob_is_invalid_reference(solbench_cache, monkeypatch):
    monkeypatch.delenv("FLASHINFER_TRACE_DIR", raising=False)
    prob = load_problem(DEV / "FlashInfer-Bench/016_gqa_ragged_prefill_causal_h32_kv4_d128")
    w = prob.smallest_workloads(1)[0]
    blob = next(s.path for s in w.inputs.values() if isinstance(s, SafetensorsInput))
    (t,) = evaluate(prob, reference_solution(prob), EvalConfig(device="cpu", timing=False, workloads=[w.uuid]))
    assert t.evaluation.status == Status.INVALID_REFERENCE
    assert "inputs unavailable" in t.evaluation.log and blob in t.evaluation.log
    assert f"workload {w.uuid}.inputs." in t.evaluation.log
