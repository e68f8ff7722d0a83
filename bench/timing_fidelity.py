"""Timing fidelity: solbench's median (harness, all-stream CUPTI span per call, cold L2)
against ground truth from an independent path, for kernels from about 2 us to 10 ms.

Ground truth: the same op run in this process under torch.profiler with the same cold-L2
protocol (flush + synchronize before each call): the median over calls of the summed
durations of the op's own kernels (CUPTI kernel records as torch.profiler reports them). solbench's number comes from the isolated worker, its own flush
segmentation and the median over timed iterations.

Reports per kernel: solbench median (ms), ground truth (ms), relative error, absolute error
(us), the CUDA-event median for comparison, and the run-to-run spread of solbench's median
over ``--repeats`` independent harness runs ((max - min) / mean).

Goal (issue 2): within 3 % for kernels >= 20 us, within 1 us below that; spread <= 2 %.

Usage: python bench/timing_fidelity.py --out DIR [--repeats 3] [--iters 50] [--gt-gap-ms 50]

The ground truth is measured twice: with the harness's duty cycle (``--gt-gap-ms`` of host idle
time after each call; the reported truth) and back to back, each with the NVML SM clock after
every call, beside the harness's own clock readings: a long GEMM run back to back can sit at the
power limit and clock lower than the same GEMM in the harness.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

FAMILIES = {
    "elementwise_mul_fp32": {
        "axes": {"n": {"type": "var"}},
        "inputs": {"a": {"shape": ["n"], "dtype": "float32"}, "b": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"c": {"shape": ["n"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(a, b):\n    return a * b\n",
        "sizes": [{"n": 1 << 14}, {"n": 1 << 18}, {"n": 1 << 22}, {"n": 1 << 25}, {"n": 1 << 27}],
        "op": lambda t: t["a"] * t["b"],
    },
    "row_sum_fp32": {
        "axes": {"r": {"type": "var"}, "c": {"type": "var"}},
        "inputs": {"x": {"shape": ["r", "c"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["r"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x):\n    return x.sum(dim=1)\n",
        "sizes": [{"r": 64, "c": 1024}, {"r": 4096, "c": 1024}, {"r": 16384, "c": 4096}],
        "op": lambda t: t["x"].sum(dim=1),
    },
    "gemm": {
        "axes": {"m": {"type": "var"}, "n": {"type": "var"}, "k": {"type": "var"}},
        "inputs": {"a": {"shape": ["m", "k"], "dtype": "bfloat16"}, "b": {"shape": ["k", "n"], "dtype": "bfloat16"}},
        "outputs": {"c": {"shape": ["m", "n"], "dtype": "bfloat16"}},
        "reference": "import torch\n\ndef run(a, b):\n    return a @ b\n",
        "sizes": [{"m": 256, "n": 256, "k": 256}, {"m": 2048, "n": 2048, "k": 2048},
                  {"m": 8192, "n": 8192, "k": 8192}, {"m": 16384, "n": 8192, "k": 16384}],
        "op": lambda t: t["a"] @ t["b"],
    },
}


def write_problem(root: Path, name: str, fam: dict) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    defn = {k: fam[k] for k in ("axes", "inputs", "outputs", "reference")}
    defn["name"] = name
    (d / "definition.json").write_text(json.dumps(defn, indent=1))
    lines = []
    for i, ax in enumerate(fam["sizes"]):
        lines.append(json.dumps({"uuid": f"{name}-{i}", "axes": ax,
                                 "inputs": {k: {"type": "random"} for k in fam["inputs"]},
                                 "tolerance": {"max_atol": 1e-2, "max_rtol": 2e-2}}))
    (d / "workload.jsonl").write_text("\n".join(lines) + "\n")
    return d


def ground_truth(fam: dict, axes: dict, iters: int, flush_bytes: int, gap_ms: float = 0.0) -> dict:
    """Median per-call kernel time (ms) of the op, measured in this process: torch.profiler's
    per-kernel records (``prof.events()``), the op's kernels of each call summed, the flush
    (a fill kernel launched before each call) excluded by name.

    ``gap_ms``: idle host time after each call (0: back to back). The harness spends tens of
    ms of host time between timed calls, so a long kernel runs at a lower duty cycle there than
    in a back-to-back loop, which can hold the GPU at its power limit; the gap reproduces the
    harness's duty cycle. The SM clock (NVML) is sampled after every call."""
    from torch.profiler import ProfilerActivity, profile

    from solbench.harness.telemetry import Telemetry

    tele = Telemetry(torch.cuda.current_device())
    clocks: list[float] = []
    reasons: set[str] = set()

    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    tensors = {}
    for name, spec in fam["inputs"].items():
        shape = [axes[s] for s in spec["shape"]]
        tensors[name] = torch.randn(*shape, device="cuda", dtype=dt[spec["dtype"]])
    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
    for _ in range(5):
        fam["op"](tensors)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(iters):
            flush.fill_(i)
            torch.cuda.synchronize()
            fam["op"](tensors)
            torch.cuda.synchronize()
            if tele.ok:
                smp = tele.sample()
                clocks.append(smp.get("sm_clock_mhz") or float("nan"))
                reasons.update(smp.get("throttle_reasons", []))
            if gap_ms > 0:
                time.sleep(gap_ms / 1000.0)
    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    per_call, cur, names = [], None, set()
    for e in kernels:
        if "FillFunctor" in e.name:
            if cur is not None:
                per_call.append(cur)
            cur = 0.0
            continue
        if cur is not None:
            cur += e.time_range.elapsed_us()
            names.add(e.name[:60])
    if cur is not None:
        per_call.append(cur)
    return {"gt_ms": statistics.median(per_call) / 1000.0 if per_call else float("nan"),
            "gt_calls": len(per_call), "kernels": sorted(names),
            "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
            "throttle_reasons": sorted(reasons)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--gt-gap-ms", type=float, default=50.0,
                    help="host idle time after each ground-truth call (the harness's duty cycle); "
                         "a back-to-back ground truth is measured beside it")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("timing_fidelity needs a CUDA device", file=sys.stderr)
        return 2
    from solbench.harness import EvalConfig, evaluate
    from solbench.spec import load_problem, reference_solution

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    root = Path(tempfile.mkdtemp(prefix="solbench-fidelity-"))
    for fname in args.families.split(","):
        fam = FAMILIES[fname]
        prob = load_problem(write_problem(root, fname, fam))
        sol = reference_solution(prob)
        medians: dict[str, list[float]] = {w.uuid: [] for w in prob.workloads}
        events: dict[str, list[float]] = {w.uuid: [] for w in prob.workloads}
        ksums: dict[str, list[float]] = {w.uuid: [] for w in prob.workloads}
        methods: dict[str, str] = {}
        hclocks: dict[str, list[float]] = {}
        for rep in range(args.repeats):
            t0 = time.time()
            cfg = EvalConfig(device="cuda", rounds=1, iters=args.iters, reference_timing=False,
                             precision_check=False, seed=rep)
            for tr in evaluate(prob, sol, cfg):
                ev = tr.evaluation
                if ev.timing is None:
                    print(f"{fname} {tr.workload.uuid}: {ev.status.value} {ev.log[-300:]}")
                    continue
                medians[tr.workload.uuid].append(ev.timing.median_ms)
                clk = [x.get("sm_clock_mhz") for x in (ev.telemetry or {}).get("samples", [])
                       if isinstance(x, dict) and x.get("sm_clock_mhz")]
                hclocks.setdefault(tr.workload.uuid, []).extend(clk)
                ksums[tr.workload.uuid].append(ev.timing.kernel_sum_median_ms or float("nan"))
                methods[tr.workload.uuid] = ev.timing.method
            print(f"{fname}: harness run {rep} took {time.time() - t0:.1f} s", flush=True)
        for w in prob.workloads:
            gt = ground_truth(fam, w.axes, args.iters, 2 * l2, gap_ms=args.gt_gap_ms)
            gt_b2b = ground_truth(fam, w.axes, args.iters, 2 * l2, gap_ms=0.0)
            ms = medians[w.uuid]
            if not ms:
                continue
            med = statistics.median(ms)
            spread = (max(ms) - min(ms)) / statistics.mean(ms) if len(ms) > 1 else 0.0
            rel = (med - gt["gt_ms"]) / gt["gt_ms"] if gt["gt_ms"] > 0 else float("nan")
            abs_us = (med - gt["gt_ms"]) * 1000
            ok = (abs(rel) <= 0.03) if gt["gt_ms"] >= 0.020 else (abs(abs_us) <= 1.0)
            rows.append({"family": fname, "workload": w.uuid, "axes": w.axes, "method": methods.get(w.uuid),
                         "solbench_median_ms": med, "solbench_medians_ms": ms,
                         "kernel_sum_median_ms": statistics.median(ksums[w.uuid]),
                         "ground_truth_ms": gt["gt_ms"], "gt_kernels": gt["kernels"],
                         "gt_gap_ms": args.gt_gap_ms, "gt_sm_clock_mhz": gt["sm_clock_mhz_median"],
                         "gt_throttle_reasons": gt["throttle_reasons"],
                         "ground_truth_back_to_back_ms": gt_b2b["gt_ms"],
                         "gt_back_to_back_sm_clock_mhz": gt_b2b["sm_clock_mhz_median"],
                         "gt_back_to_back_throttle_reasons": gt_b2b["throttle_reasons"],
                         "harness_sm_clock_mhz": (statistics.median(hclocks[w.uuid])
                                                  if hclocks.get(w.uuid) else None),
                         "rel_error": rel, "abs_error_us": abs_us, "spread": spread,
                         "meets_goal": bool(ok and spread <= 0.02)})
    print()
    hdr = (f"{'kernel':34s} {'method':7s} {'solbench ms':>12s} {'truth ms':>10s} {'rel err':>8s} "
           f"{'abs us':>8s} {'spread':>7s} goal  b2b-truth-ms  MHz(harness/truth/b2b)")
    print(hdr)
    for r in rows:
        name = f"{r['family']} {','.join(str(v) for v in r['axes'].values())}"
        print(f"{name[:34]:34s} {str(r['method']):7s} {r['solbench_median_ms']:12.5f} {r['ground_truth_ms']:10.5f} "
              f"{r['rel_error']:8.2%} {r['abs_error_us']:8.2f} {r['spread']:7.2%} {'yes' if r['meets_goal'] else 'NO '} "
              f"{r['ground_truth_back_to_back_ms']:12.5f}  {r['harness_sm_clock_mhz']}/{r['gt_sm_clock_mhz']}/"
              f"{r['gt_back_to_back_sm_clock_mhz']}")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "iters": args.iters,
           "repeats": args.repeats, "rows": rows}
    (out / "timing_fidelity.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
