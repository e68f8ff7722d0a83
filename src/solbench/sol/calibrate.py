"""Calibration: measure attainable ceilings on the current GPU and write a measured spec.

Measured (docs/sol-model.md, "Hardware specs and calibration"):
    copy        device-to-device copy of a large buffer; bytes = read + write
    read        read-only stream (a sum reduction over a large buffer); bytes = buffer
    write       write-only stream (fill_); bytes = buffer
    gemm        torch.matmul M=N=K on random data (never zeros: power depends on data) per
                dtype: bf16, fp16, tf32 (fp32 with TF32 allowed), fp32 (TF32 off, CUDA cores),
                fp8 e4m3 via torch._scaled_mm where supported; FLOP = 2*M*N*K

Each figure is the best of ``repeats`` timed batches of ``iters`` back-to-back calls between
two CUDA events (launch overhead amortised): an attainable ceiling, not a typical speed.
Clocks are recorded, never changed.
"""

from __future__ import annotations

import datetime as _dt
import platform
from typing import Any, Callable

from .hwspec import HardwareSpec, calibrated_spec, hardware_for_device_name, load_hardware


def _time_ms(fn: Callable[[], Any], iters: int, repeats: int) -> tuple[float, float]:
    """(best, median) ms per call over ``repeats`` batches of ``iters`` calls."""
    import torch

    fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(repeats):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        per.append(a.elapsed_time(b) / iters)
    per.sort()
    return per[0], per[len(per) // 2]


def _clocks() -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)}
    except Exception:  # noqa: BLE001 - NVML is optional
        return {}


def measure(*, buffer_bytes: int = 2 << 30, gemm_n: int = 8192, iters: int = 10,
            repeats: int = 5, dtypes: tuple[str, ...] = ("bf16", "fp16", "tf32", "fp32", "fp8"),
            log: Callable[[str], None] = lambda s: None) -> dict:
    """Measure ceilings on ``cuda:0``. Returns ``{"dram_bytes_per_s", "read_bytes_per_s",
    "write_bytes_per_s", "tensor_flops_per_s": {cls: FLOP/s}, "cuda_flops_per_s": {"fp32": ...},
    "details": {...}}``. Raises RuntimeError without CUDA."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("calibrate needs a CUDA GPU")
    dev = torch.device("cuda", 0)
    out: dict[str, Any] = {"tensor_flops_per_s": {}, "cuda_flops_per_s": {}, "details": {}}
    n = buffer_bytes // 2
    src = torch.randn(n, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    best, med = _time_ms(lambda: dst.copy_(src), iters, repeats)
    out["dram_bytes_per_s"] = 2 * buffer_bytes / (best * 1e-3)
    out["details"]["copy"] = {"bytes": 2 * buffer_bytes, "best_ms": best, "median_ms": med}
    log(f"copy  {out['dram_bytes_per_s'] / 1e12:.2f} TB/s")
    acc = torch.empty((), device=dev, dtype=torch.float32)
    best, med = _time_ms(lambda: torch.sum(src, dim=0, dtype=torch.float32, out=acc), iters, repeats)
    out["read_bytes_per_s"] = buffer_bytes / (best * 1e-3)
    out["details"]["read"] = {"bytes": buffer_bytes, "best_ms": best, "median_ms": med}
    log(f"read  {out['read_bytes_per_s'] / 1e12:.2f} TB/s")
    best, med = _time_ms(lambda: dst.fill_(1.5), iters, repeats)
    out["write_bytes_per_s"] = buffer_bytes / (best * 1e-3)
    out["details"]["write"] = {"bytes": buffer_bytes, "best_ms": best, "median_ms": med}
    log(f"write {out['write_bytes_per_s'] / 1e12:.2f} TB/s")
    del src, dst
    torch.cuda.empty_cache()

    N = gemm_n
    flop = 2.0 * N * N * N
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    for cls in dtypes:
        try:
            if cls in ("bf16", "fp16", "tf32", "fp32"):
                dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cls, torch.float32)
                a = torch.randn(N, N, device=dev, dtype=dt)
                b = torch.randn(N, N, device=dev, dtype=dt)
                c = torch.empty(N, N, device=dev, dtype=dt)
                torch.backends.cuda.matmul.allow_tf32 = cls == "tf32"
                best, med = _time_ms(lambda: torch.matmul(a, b, out=c), max(2, iters // 2), repeats)
            elif cls == "fp8":
                a = torch.randn(N, N, device=dev).clamp(-2, 2).to(torch.float8_e4m3fn)
                b = torch.randn(N, N, device=dev).clamp(-2, 2).to(torch.float8_e4m3fn).t()
                one = torch.ones((), device=dev)
                best, med = _time_ms(lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16),
                                     max(2, iters // 2), repeats)
            else:
                continue
        except Exception as e:  # noqa: BLE001 - a dtype the GPU or torch lacks
            out["details"][f"gemm_{cls}"] = {"error": f"{type(e).__name__}: {e}"}
            log(f"gemm {cls}: {type(e).__name__}: {e}")
            continue
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32
        rate = flop / (best * 1e-3)
        (out["cuda_flops_per_s"] if cls == "fp32" else out["tensor_flops_per_s"])[cls] = rate
        out["details"][f"gemm_{cls}"] = {"n": N, "flop": flop, "best_ms": best, "median_ms": med}
        log(f"gemm {cls} {rate / 1e12:.1f} TFLOP/s")
        torch.cuda.empty_cache()
    out["details"]["clocks"] = _clocks()
    out["details"]["device_name"] = torch.cuda.get_device_name(0)
    out["details"]["torch"] = torch.__version__
    return out


def calibrate(base: str | HardwareSpec | None = None, **kw) -> tuple[HardwareSpec, dict]:
    """Measure and build a ``kind="measured"`` spec usable by :func:`solbench.sol.bound`.

    ``base``: the datasheet spec to inherit unmeasured figures from (default: the one
    matching the device name). Raises RuntimeError without CUDA or without a matching spec.
    """
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("calibrate needs a CUDA GPU")
    name = torch.cuda.get_device_name(0)
    if base is None:
        sid = hardware_for_device_name(name)
        if sid is None:
            raise RuntimeError(f"no bundled spec matches device {name!r}: pass --base")
        base = sid
    base_spec = load_hardware(base)
    m = measure(**kw)
    clocks = m["details"].get("clocks", {})
    measured = {k: m[k] for k in ("dram_bytes_per_s", "read_bytes_per_s", "write_bytes_per_s",
                                  "tensor_flops_per_s", "cuda_flops_per_s")}
    if clocks.get("sm_clock_mhz"):
        measured["clock_mhz"] = clocks["sm_clock_mhz"]
    # the fp32 GEMM measures the FMA pipe: never let a slower GEMM lower the elementwise peak
    if "fp32" in measured["cuda_flops_per_s"]:
        measured["cuda_flops_per_s"] = {}
        m["details"]["note"] = ("fp32 GEMM (TF32 off) reported in details only: it does not reach "
                                "the FMA peak, so cuda fp32 stays the datasheet figure")
    date = _dt.date.today().isoformat()
    spec = calibrated_spec(base_spec, measured, host=platform.node() or "unknown-host", date=date)
    return spec, m
