"""The speed-of-light bound: T_SOL = max over resources of work / peak.

Resources (``refined`` model, the default; shared/docs/sol-model.md):
    tensor   sum over operand classes of tensor-core FLOP / peak(class)
    cuda     CUDA-core FLOP (elementwise, reductions, fp32 matmul without TF32) / peak(class)
    sfu      transcendental evaluations / (SFU rate + FP32 rate / 8): exp2 may be emulated
             with ~8 FP32 FLOPs of polynomial on the FMA pipe (as FlashAttention-4 does),
             so the SFU and the FMA pipe together bound it
    dram     fused bytes (each distinct input read once, each output written once, own
             widths) / DRAM bandwidth

``solar`` model (upstream SOLAR's conventions, to reproduce SOL-ExecBench's official figures;
docs/sol-model.md lists each with an example):
    precision from the quantised dtypes the reference *source* names: fp4 (0.5 B per element,
    fp4 rate), else fp8 (1 B, fp8 rate), else 16-bit (2 B, 16-bit rate; fp32 problems too);
    MACs of the traced layers (:mod:`solbench.sol.solar_graph`: causal attention in full,
    einsum none, packed fp4 K halved) at that one rate, versus
    the layer walk's element count (solar_graph) x that one width; plus the spec's fixed
    overhead (0.4 us on B200_SOLAR) except for quantised problems, whose official rows have none.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .counting import Counts, count_workload
from .hwspec import HardwareSpec, load_hardware

#: fastest substitute when a GPU lacks a tensor-core format: fp4 and fp8 values are exact in
#: fp8 / fp16 respectively, so a kernel may up-convert and use those units
_TENSOR_FALLBACK = {"fp4": ["fp8", "fp16", "bf16"], "fp8": ["fp16", "bf16"], "int8": ["fp16"],
                    "bf16": ["fp16"], "fp16": ["bf16"]}
#: FP32 FLOPs of a polynomial exp2 emulation on the FMA pipe (Cody-Waite range reduction +
#: degree-3 polynomial, as in FlashAttention-4)
EMULATED_SFU_FLOPS = 8.0


class SolBound(BaseModel):
    """T_SOL of one workload on one GPU spec. Times in ms, work in FLOP / ops / bytes."""

    workload_uuid: str | None = None
    axes: dict[str, int] = Field(default_factory=dict)
    model: Literal["refined", "solar"]
    hardware: str = Field(description="hardware spec id")
    hardware_kind: str = Field(description="datasheet | solar-lock | measured")
    sol_ms: float
    bottleneck: str = Field(description="binding resource: tensor | cuda | sfu | dram")
    terms_ms: dict[str, float] = Field(description="time of each resource (ms)")
    tensor_terms_ms: dict[str, float] = Field(default_factory=dict, description="tensor term by class")
    overhead_ms: float = 0.0
    flops: dict[str, float] = Field(description="work by class: tensor_<cls>, cuda_<cls> (FLOP), sfu (ops)")
    total_flops: float
    solar_macs: float = Field(description="MACs of matmul/conv/attention with causal counted in full "
                              "(solar model: the traced layers' MACs, see solar_graph)")
    bytes_fused: float
    bytes_unfused: float
    bytes_model: float = Field(description="bytes the DRAM term uses")
    arithmetic_intensity: float | None = Field(description="total FLOP / bytes_model")
    unknown_ops: dict[str, int] = Field(default_factory=dict)
    real_tensors: bool = False
    counting_mode: str = "fake"
    synthesized_inputs: list[str] = Field(default_factory=list)
    substitutions: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _tensor_rate(hw: HardwareSpec, cls: str, subs: list[str]) -> tuple[str, float] | None:
    r = hw.tensor_peak(cls)
    if r:
        return cls, r
    for alt in _TENSOR_FALLBACK.get(cls, []):
        r = hw.tensor_peak(alt)
        if r:
            subs.append(f"{cls} tensor work priced at the {alt} rate ({hw.id} has no {cls} tensor cores)")
            return alt, r
    return None


def bound_from_counts(counts: Counts, hw: HardwareSpec, model: str = "refined", *,
                      allow_tf32: bool = False, workload_uuid: str | None = None,
                      axes: dict | None = None) -> SolBound:
    """T_SOL from counted work (see module docstring). Raises ValueError for an unknown model."""
    if model not in ("refined", "solar"):
        raise ValueError(f"unknown SOL model {model!r} (expected 'refined' or 'solar')")
    subs: list[str] = []
    notes = list(counts.notes)
    flops: dict[str, float] = {}
    tensor_terms: dict[str, float] = {}
    terms: dict[str, float] = {}
    solar_macs = sum(counts.mma_flops_full.values()) / 2
    if model == "solar" and counts.solar_graph is not None:
        solar_macs = float(counts.solar_graph.macs())
    if model == "refined":
        # CUDA-core work: elementwise/reductions by output class, plus matmuls that no
        # tensor core may run (fp32 without TF32; fp64 on a GPU without fp64 tensor cores)
        cuda_work: dict[str, float] = {k: v for k, v in counts.cuda_flops.items() if v}
        for cls, v in cuda_work.items():
            flops[f"cuda_{cls}"] = v
        for cls, f in counts.mma_flops.items():
            if not f:
                continue
            if cls == "fp32" and not (allow_tf32 and hw.tensor_peak("tf32")):
                cuda_work["fp32"] = cuda_work.get("fp32", 0) + f
                flops["cuda_fp32_matmul"] = f
                continue
            if cls == "fp64" and not hw.tensor_peak("fp64"):
                cuda_work["fp64"] = cuda_work.get("fp64", 0) + f
                flops["cuda_fp64_matmul"] = f
                continue
            key = "tf32" if cls == "fp32" else cls
            got = _tensor_rate(hw, key, subs)
            if got is None:
                raise ValueError(f"{hw.id}: no tensor-core rate for {key}")
            tensor_terms[key] = tensor_terms.get(key, 0) + f / got[1] * 1e3
            flops[f"tensor_{key}"] = flops.get(f"tensor_{key}", 0) + f
        cuda_ms = sum(f / (hw.cuda_peak(cls) or hw.cuda_peak("fp32")) * 1e3 for cls, f in cuda_work.items())
        flops = {k: v for k, v in flops.items() if v}
        if counts.sfu_ops:
            flops["sfu"] = counts.sfu_ops
        terms["tensor"] = sum(tensor_terms.values())
        terms["cuda"] = cuda_ms
        sfu_rate = (hw.peak.sfu_ops_per_s or 0) + (hw.cuda_peak("fp32") or 0) / EMULATED_SFU_FLOPS
        terms["sfu"] = counts.sfu_ops / sfu_rate * 1e3 if sfu_rate else 0.0
        bytes_model = counts.bytes_fused
        terms["dram"] = bytes_model / hw.peak.dram_bytes_per_s * 1e3
        overhead = 0.0
        total = sum(v for k, v in flops.items() if k != "sfu")
    else:
        # upstream's precision: the quantised formats named in the reference source (a fp8
        # input the source never names is priced as a 16-bit problem); fp32 at the 16-bit rate
        classes = set(counts.source_quant)
        if "fp4" in classes:
            rate_cls, bpe = "fp4", 0.5
        elif "fp8" in classes:
            rate_cls, bpe = "fp8", 1.0
        else:
            rate_cls, bpe = "fp16", 2.0
        got = _tensor_rate(hw, rate_cls, subs)
        rate = got[1] if got else hw.tensor_peak("fp16")
        tensor_terms[rate_cls] = 2 * solar_macs / rate * 1e3
        flops[f"tensor_{rate_cls}"] = 2 * solar_macs
        terms["tensor"] = tensor_terms[rate_cls]
        if counts.solar_graph is not None:
            bytes_model = counts.solar_graph.fused_elements() * bpe
        else:
            bytes_model = counts.elements_io() * bpe
        terms["dram"] = bytes_model / hw.peak.dram_bytes_per_s * 1e3
        # the official rows of quantised problems carry no launch floor (some are below it)
        overhead = 0.0 if rate_cls in ("fp8", "fp4") else hw.solar_fixed_overhead_ms
        total = 2 * solar_macs
    bottleneck = max(terms, key=lambda k: terms[k])
    sol_ms = terms[bottleneck] + overhead
    return SolBound(
        workload_uuid=workload_uuid, axes=dict(axes or {}), model=model, hardware=hw.id,
        hardware_kind=hw.kind, sol_ms=sol_ms, bottleneck=bottleneck, terms_ms=terms,
        tensor_terms_ms=tensor_terms, overhead_ms=overhead, flops=flops, total_flops=total,
        solar_macs=solar_macs, bytes_fused=counts.bytes_fused, bytes_unfused=counts.bytes_unfused,
        bytes_model=bytes_model,
        arithmetic_intensity=(total / bytes_model) if bytes_model else None,
        unknown_ops=dict(counts.unknown_ops), real_tensors=counts.real_tensors,
        counting_mode=counts.mode, synthesized_inputs=list(counts.synthesized),
        substitutions=subs, notes=notes,
    )


def bound(problem, workload, hardware: str | HardwareSpec = "H200", model: str = "refined",
          *, counts: Counts | None = None) -> SolBound:
    """T_SOL of ``workload`` of ``problem`` on ``hardware``.

    Args:
        problem: :class:`solbench.spec.Problem` (definition dir or KernelBench file).
        workload: a :class:`solbench.spec.Workload` of it, or its index / uuid (prefix).
        hardware: bundled spec id (``H200``, ``B200``, ``B200_SOLAR``, ...), a TOML path, or a
            :class:`HardwareSpec` (e.g. from :func:`calibrated_spec`).
        model: ``refined`` (default) or ``solar``.
        counts: reuse counted work (the counting does not depend on hardware or model).

    Raises:
        HardwareError: unknown hardware. CountingError: the reference could not be run.
        ValueError: unknown model.
    """
    if isinstance(workload, (int, str)):
        workload = problem.workload(workload)
    hw = load_hardware(hardware)
    if counts is None:
        counts = count_workload(problem, workload)
    allow_tf32 = bool(getattr(problem.definition, "allow_tf32", False))
    return bound_from_counts(counts, hw, model, allow_tf32=allow_tf32,
                             workload_uuid=workload.uuid, axes=workload.axes)


def sol_block(b: SolBound, score=None, *, attainable: SolBound | None = None) -> dict[str, Any]:
    """The ``evaluation.sol`` block of a trace: T_SOL, bound terms, hardware spec id, and (when
    a score was computed) score, h, baseline name and finding. Strict-JSON-safe (no NaN)."""
    out: dict[str, Any] = {
        "t_sol_ms": b.sol_ms, "model": b.model, "hardware": b.hardware, "hardware_kind": b.hardware_kind,
        "bottleneck": b.bottleneck, "terms_ms": b.terms_ms, "flops": b.flops,
        "bytes_fused": b.bytes_fused, "arithmetic_intensity": b.arithmetic_intensity,
        "unknown_ops": b.unknown_ops, "real_tensors": b.real_tensors,
    }
    if attainable is not None:
        out["t_sol_attainable_ms"] = attainable.sol_ms
        out["attainable_hardware"] = attainable.hardware
    if score is not None:
        out.update({"score": score.score, "raw_score": score.raw_score, "h": score.h,
                    "baseline": score.baseline, "t_b_ms": score.t_b_ms, "t_k_ms": score.t_k_ms,
                    "finding": score.finding})
    return out
