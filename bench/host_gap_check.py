"""How much of a multi-kernel call's device span is the host's launch gaps, and does the
profiler's CPU-side recording widen them?

solbench times a call as the all-stream device span of its kernels (CUPTI through
torch.profiler). For a chain of small kernels launched from Python, that span includes the
host's time between launches. This script measures the same eager chains four ways in one
plain process (no harness), so the harness's own figure can be set beside them:

- ``events``: CUDA events around each call (device idle before it), median;
- ``span_cuda``: torch.profiler with CUDA activity only, first kernel start to last kernel end;
- ``span_cpu_cuda``: torch.profiler with CPU and CUDA activity (the harness's setting), same span;
- ``ksum``: the sum of the call's kernel durations (no gaps).

    python bench/host_gap_check.py [--iters 50] [--out FILE.json]

CUDA only. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch


def _rmsnorm(x, w):
    xf = x.to(torch.float32)
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    return ((xf * inv) * w.to(torch.float32)).to(x.dtype)


def _chain20(x):
    for _ in range(20):
        x = x + 1.0
    return x


def _cases(dev):
    x7 = torch.randn(7, 4096, device=dev, dtype=torch.bfloat16)
    w = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    x4k = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    s = torch.randn(64, 1024, device=dev)
    return [
        ("rmsnorm bf16 7x4096 (6 kernels)", lambda: _rmsnorm(x7, w)),
        ("rmsnorm bf16 4096x4096 (6 kernels)", lambda: _rmsnorm(x4k, w)),
        ("20 chained adds fp32 64x1024", lambda: _chain20(s)),
        ("softmax fp32 64x1024 (1 kernel)", lambda: torch.softmax(s, -1)),
    ]


def event_ms(fn, iters: int) -> float:
    """Median CUDA-event time (ms) of ``fn`` over ``iters`` calls after 5 warm-up calls, the
    device synchronised around each (launch overhead included)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ev = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ev.append(s.elapsed_time(e))
    return statistics.median(ev)


def _spans(fn, iters, activities):
    from torch.profiler import profile

    torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for i in range(iters):
            torch.cuda.synchronize()
            fn()
            torch.cuda.synchronize()
    kern = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kern.sort(key=lambda e: e.time_range.start)
    # every call launches the same kernels: split the ordered list into `iters` equal calls
    # (a count that does not divide means a stray kernel; the figures are then not reported)
    if not kern or len(kern) % iters:
        return float("nan"), float("nan"), len(kern)
    per = len(kern) // iters
    calls = [kern[i * per:(i + 1) * per] for i in range(iters)]
    spans = [c[-1].time_range.end - c[0].time_range.start for c in calls]
    ksum = [sum(e.time_range.end - e.time_range.start for e in c) for c in calls]
    return statistics.median(spans) / 1e3, statistics.median(ksum) / 1e3, per


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from torch.profiler import ProfilerActivity

    dev = "cuda"
    rows = []
    for name, fn in _cases(dev):
        ev = event_ms(fn, a.iters)
        sc, ks, n1 = _spans(fn, a.iters, [ProfilerActivity.CUDA])
        scc, _, n2 = _spans(fn, a.iters, [ProfilerActivity.CPU, ProfilerActivity.CUDA])
        rows.append({"case": name, "events_ms": ev, "span_cuda_ms": sc,
                     "span_cpu_cuda_ms": scc, "ksum_ms": ks, "kernels_per_call": [n1, n2]})
    print(f"{'case':40s} {'events':>9s} {'span CUDA':>10s} {'span CPU+CUDA':>14s} {'kernel sum':>11s}")
    for r in rows:
        print(f"{r['case']:40s} {r['events_ms']:9.4f} {r['span_cuda_ms']:10.4f} "
              f"{r['span_cpu_cuda_ms']:14.4f} {r['ksum_ms']:11.4f}")
    if a.out:
        with open(a.out, "w") as f:
            clean = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": clean}, f, indent=1)


if __name__ == "__main__":
    main()
