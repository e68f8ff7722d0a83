"""The speed-of-light bound: T_SOL = max over resources of work / peak.

Resources (``refined`` model, the default; docs/sol-model.md):
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
    the layer walk's element count (solar_graph) x that one width (a fp8 problem's GEMM
    weights at 2 B: :meth:`~solbench.sol.solar_graph.SolarGraph.weight_root_elements`; a fp4
    problem's packed weights and their block scales not at all); plus the spec's fixed
    overhead (0.4 us on B200_SOLAR) except for quantised problems, whose official rows have none.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .counts import Counts
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
    mma_pricing: dict[str, dict] = Field(default_factory=dict, description=(
        "refined: per operand precision class, {flops, unit (tensor|cuda), method, flop_per_s}"))
    t_certain_ms: float = Field(0.0, description=(
        "certain floor (ms): compulsory output bytes beyond L2 at peak DRAM bandwidth; no "
        "correct kernel can be faster (see certain_ms)"))
    bytes_outputs_certain: float = Field(0.0, description=(
        "bytes every correct implementation must write: each output element that must change, "
        "once (Counts.bytes_outputs_certain)"))

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


#: fp32-accurate products on tensor cores (docs/sol-model.md, refined convention 2):
#: both operands fp32: 3xTF32 (a = a_hi + a_lo in TF32, 3 products, a_lo*b_lo dropped: ~22
#: correct bits, CUTLASS's fp32-accurate mode) or BF16x6 (3-way BF16 splits, the 6 products of
#: order >= 2^-16 kept; cuBLAS's BF16x9 keeps all 9), or the CUDA cores; an fp32 operand
#: against a 16-bit-or-narrower one (exact in BF16 and in TF32): BF16x3 or 2xTF32 splits of
#: the fp32 operand. The bound takes the fastest of these on the given GPU.
_FP32_METHODS = {
    "fp32": (("3xTF32", "tf32", 3.0), ("BF16x6", "bf16", 6.0)),
    "fp32xbf16": (("2xTF32 split of the fp32 operand", "tf32", 2.0),
                  ("BF16x3 split of the fp32 operand", "bf16", 3.0)),
}


def mma_rate(hw: HardwareSpec, prec: str, allow_tf32: bool, subs: list[str]) -> tuple[str, str, float]:
    """Fastest unit that delivers ``prec``-class accuracy for a product on ``hw``.

    Args:
        prec: operand precision class (:func:`solbench.sol.counting.mma_precision`): exact,
            fp4, fp8, bf16 (any 16-bit), fp32xbf16, fp32, fp64.
        allow_tf32: the definition allows TF32 for fp32 products (then the TF32 rate).

    Returns:
        (unit "tensor" | "cuda", method, FLOP/s).

    Raises:
        ValueError: ``hw`` has no rate for the class at all.
    """
    if prec in ("exact", "fp4", "fp8", "bf16"):
        want = {"exact": "fp4", "fp4": "fp4", "fp8": "fp8", "bf16": "bf16"}[prec]
        if prec == "exact":  # exact small values: the fastest tensor format of the GPU
            cands = [(c, hw.tensor_peak(c)) for c in ("fp4", "fp8", "int8", "fp16", "bf16") if hw.tensor_peak(c)]
            if cands:
                c, r = max(cands, key=lambda x: x[1])
                return "tensor", f"{c} tensor cores (exact operands)", r
        got = _tensor_rate(hw, want, subs)
        if got is None:
            raise ValueError(f"{hw.id}: no tensor-core rate for {want}")
        return "tensor", f"{got[0]} tensor cores, fp32 accumulation", got[1]
    if prec == "fp64":
        if hw.tensor_peak("fp64"):
            return "tensor", "fp64 tensor cores", hw.tensor_peak("fp64")
        return "cuda", "fp64 CUDA cores", hw.cuda_peak("fp64") or hw.cuda_peak("fp32")
    if prec not in _FP32_METHODS:
        raise ValueError(f"unknown precision class {prec!r}")
    if allow_tf32 and hw.tensor_peak("tf32"):
        return "tensor", "tf32 tensor cores (allow_tf32)", hw.tensor_peak("tf32")
    best = ("cuda", "fp32 CUDA cores", hw.cuda_peak("fp32") or 0.0)
    for method, cls, n in _FP32_METHODS[prec]:
        r = hw.tensor_peak(cls)
        if r and r / n > best[2]:
            best = ("tensor", f"{method} emulation on {cls} tensor cores", r / n)
    if not best[2]:
        raise ValueError(f"{hw.id}: no rate for fp32 products")
    return best


def certain_ms(counts: Counts, hw: HardwareSpec) -> float:
    """The certain floor (ms): bytes every correct implementation must write to DRAM within the
    timed call, at the GPU's peak DRAM bandwidth.

    Every output element that must change (an output aliasing an input counts only its changed
    region, :attr:`Counts.bytes_outputs_certain`) has to be in memory when the call returns; a
    write-back L2 can hold at most ``l2_bytes`` of it dirty, so the rest crossed the DRAM
    interface during the call. Inputs are not in it (a kernel may derive an input from others
    the problem's generator ties it to), nor FLOPs (an algorithm may need fewer), nor any
    per-launch cost. 0 when the spec gives no L2 size or the outputs fit in L2.
    """
    if not hw.l2_bytes:
        return 0.0
    spill = counts.bytes_outputs_certain - hw.l2_bytes
    return max(0.0, spill) / hw.peak.dram_bytes_per_s * 1e3


def bound_from_counts(counts: Counts, hw: HardwareSpec, model: str = "refined", *,
                      allow_tf32: bool = False, workload_uuid: str | None = None,
                      axes: dict | None = None) -> SolBound:
    """T_SOL from counted work (see module docstring). Raises ValueError for an unknown model."""
    if model not in ("refined", "solar"):
        raise ValueError(f"unknown SOL model {model!r} (expected 'refined' or 'solar')")
    subs: list[str] = []
    pricing: dict[str, dict] = {}
    notes = list(counts.notes)
    if model == "solar" and hw.solar_spec:
        # upstream prices this GPU with other constants (B200: the 1.5 GHz lock): the solar
        # model exists to reproduce upstream's figures, so it uses them
        notes.append(f"solar model on {hw.id} uses {hw.solar_spec} (upstream SOLAR's constants for it)")
        hw = load_hardware(hw.solar_spec)
    flops: dict[str, float] = {}
    tensor_terms: dict[str, float] = {}
    terms: dict[str, float] = {}
    solar_macs = sum(counts.mma_flops_full.values()) / 2
    solar = counts.solar() if model == "solar" else None
    if solar is not None:
        solar_macs = float(solar.macs)
    if model == "refined":
        # tensor-core-eligible work by the precision its operands' values carry (provenance
        # from the problem's inputs), each priced at the fastest unit delivering that accuracy
        by_prec = {k: v for k, v in (counts.mma_by_precision or {}).items() if v}
        if not by_prec and counts.mma_flops:  # counts made without provenance: dtype classes
            by_prec = {("bf16" if k in ("fp16", "bf16") else k): v for k, v in counts.mma_flops.items() if v}
        cuda_src = counts.cuda_by_precision if counts.cuda_by_precision else counts.cuda_flops
        cuda_work: dict[str, float] = {k: v for k, v in cuda_src.items() if v}
        for cls, v in cuda_work.items():
            flops[f"cuda_{cls}"] = v
        cuda_ms = sum(f / (hw.cuda_peak(cls) or hw.cuda_peak("fp32")) * 1e3 for cls, f in cuda_work.items())
        for prec, f in sorted(by_prec.items()):
            unit, method, rate = mma_rate(hw, prec, allow_tf32, subs)
            pricing[prec] = {"flops": f, "unit": unit, "method": method, "flop_per_s": rate}
            if unit == "cuda":
                cuda_ms += f / rate * 1e3
                flops[f"cuda_{prec}_matmul"] = flops.get(f"cuda_{prec}_matmul", 0) + f
            else:
                tensor_terms[prec] = tensor_terms.get(prec, 0) + f / rate * 1e3
                flops[f"tensor_{prec}"] = flops.get(f"tensor_{prec}", 0) + f
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
        if solar is not None:
            bytes_model = solar.fused_elements * bpe
            if rate_cls == "fp8":
                # the GEMM weights of a fp8 problem are read at 2 B (16-bit module parameters
                # in the kernels upstream traced): one more byte per weight element
                bytes_model += solar.weight_root_elements * (2.0 - bpe)
            elif rate_cls == "fp4":
                # the packed fp4 GEMM weights and their block scales are not read: module
                # buffers, untraced, in the kernels upstream traced (solar convention 2c)
                bytes_model -= solar.scaled_weight_root_elements * bpe
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
        substitutions=subs, notes=notes, mma_pricing=pricing,
        t_certain_ms=certain_ms(counts, hw), bytes_outputs_certain=counts.bytes_outputs_certain,
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
        from .counting import count_workload  # torch: only when something must be counted

        counts = count_workload(problem, workload)
    allow_tf32 = bool(getattr(problem.definition, "allow_tf32", False))
    return bound_from_counts(counts, hw, model, allow_tf32=allow_tf32,
                             workload_uuid=workload.uuid, axes=workload.axes)
