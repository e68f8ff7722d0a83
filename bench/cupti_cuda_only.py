"""Does the harness's CUPTI span of a launch-bound eager call lose its inflation when the
timed profiler sessions record CUDA activity only (``EvalConfig(cupti_markers="streams")``)?

The eager rmsnorm bf16 7x4096 (6 small kernels) read 0.286 ms in the harness, 0.141 ms with
CUDA events and 0.166 ms as a CUDA-only torch.profiler span: the profiler's CPU activity
(every op recorded on the host) widens the launch gaps that sit inside a multi-kernel span.
For three shapes this script measures, in one run:

- ``events``: CUDA events around each call in a plain process (device idle before it);
- ``plain CPU+CUDA`` / ``plain CUDA``: the first-to-last kernel span of each call under
  torch.profiler with and without CPU activity, plain process (bench/host_gap_check.py);
- ``harness ranges``: the harness's median (reference as candidate, no reference timing),
  markers found through record_function ranges (CPU + CUDA activity: the default);
- ``harness streams``: the same with CUDA activity only, markers on the worker's own
  streams (harness/timing.py ``stream_segmentation``), with the method and note it recorded
  (a fallback to CUDA events shows as method ``cuda_event``).

    python bench/cupti_cuda_only.py --out $OUT/cupti [--iters 40] [--budget-s 85]

On the CPU (``--device cpu``) only the harness rows run (marker methods are CUDA-only, so both
read alike there): a check of the script, not a measurement. Writes
``OUT/cupti_cuda_only.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

SHAPES = [(7, 4096), (128, 4096), (4096, 4096)]

DEFINITION = {
    "name": "rmsnorm_bf16_gap",
    "description": "eager RMSNorm, bf16 in and out, fp32 inside: 6 kernels a call",
    "axes": {"rows": {"type": "var"}, "D": {"type": "var"}},
    "inputs": {"x": {"shape": ["rows", "D"], "dtype": "bfloat16"},
               "w": {"shape": ["D"], "dtype": "bfloat16"}},
    "outputs": {"y": {"shape": ["rows", "D"], "dtype": "bfloat16"}},
    "reference": ("import torch\n\n\n@torch.no_grad()\ndef run(x, w):\n"
                  "    xf = x.to(torch.float32)\n"
                  "    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-5)\n"
                  "    return ((xf * inv) * w.to(torch.float32)).to(x.dtype)\n"),
}


def plain(rows: int, d: int, iters: int) -> dict:
    """Events and plain profiler spans (ms, medians) of one shape, CUDA."""
    from host_gap_check import _rmsnorm, _spans, event_ms
    from torch.profiler import ProfilerActivity

    x = torch.randn(rows, d, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(d, device="cuda", dtype=torch.bfloat16)

    def fn():
        return _rmsnorm(x, w)

    ev = event_ms(fn, iters)
    sc, ks, _ = _spans(fn, iters, [ProfilerActivity.CUDA])
    scc, _, _ = _spans(fn, iters, [ProfilerActivity.CPU, ProfilerActivity.CUDA])
    return {"events_ms": ev, "plain_cuda_ms": sc, "plain_cpu_cuda_ms": scc, "ksum_ms": ks}


def harness(problem_dir: Path, device: str, markers: str, iters: int) -> dict[str, dict]:
    """Per workload uuid: the harness's timing of the reference as candidate."""
    from solbench.harness import EvalConfig, evaluate
    from solbench.spec import load_problem
    from solbench.spec.problem import reference_solution

    prob = load_problem(problem_dir)
    cfg = EvalConfig(device=device, iters=iters, rounds=1, reference_timing=False, spare_workers=0,
                     cupti_markers=markers)
    out = {}
    for t in evaluate(prob, reference_solution(prob), cfg):
        ev, tm = t.evaluation, t.evaluation.timing
        out[t.workload.uuid] = {
            "status": ev.status.value, "method": tm.method if tm else None,
            "median_ms": tm.median_ms if tm else None, "iqr_ms": tm.iqr_ms if tm else None,
            "kernel_sum_ms": tm.kernel_sum_median_ms if tm else None,
            "notes": tm.notes if tm else [], "findings": sorted({f.check for f in ev.findings})}
    return out


def _f(v) -> str:
    return f"{v:.4f}" if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=85.0, help="stop starting new steps after this")
    a = ap.parse_args()
    t0 = time.perf_counter()
    cuda = torch.device(a.device).type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp())
    pdir = tmp / DEFINITION["name"]
    pdir.mkdir()
    (pdir / "definition.json").write_text(json.dumps(DEFINITION))
    uuids = {f"gap-{r}x{d}": (r, d) for r, d in SHAPES}
    (pdir / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": u, "axes": {"rows": r, "D": d},
                    "inputs": {"x": {"type": "random"}, "w": {"type": "random"}}}) + "\n"
        for u, (r, d) in uuids.items()))
    rows = {u: {"shape": f"{r}x{d}"} for u, (r, d) in uuids.items()}
    skipped = []
    if cuda:
        for u, (r, d) in uuids.items():
            rows[u].update(plain(r, d, a.iters))
    for markers in ("ranges", "streams"):
        if time.perf_counter() - t0 > a.budget_s:
            skipped.append(f"harness {markers}: over --budget-s")
            continue
        ts = time.perf_counter()
        res = harness(pdir, a.device, markers, a.iters)
        for u, r in res.items():
            rows[u][f"harness_{markers}"] = r
        rows_s = round(time.perf_counter() - ts, 1)
        print(f"harness {markers}: {rows_s} s", flush=True)
    doc = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
           "iters": a.iters, "seconds": round(time.perf_counter() - t0, 1), "skipped": skipped,
           "rows": list(rows.values())}
    (a.out / "cupti_cuda_only.json").write_text(json.dumps(doc, indent=1, allow_nan=False,
                                                           default=lambda v: None))
    print(f"{'shape':>10s} {'events':>8s} {'plain CPU+CUDA':>15s} {'plain CUDA':>11s} {'kernel sum':>11s} "
          f"{'harness ranges':>15s} {'harness streams':>16s}  streams method / note")
    for r in rows.values():
        hr, hs = r.get("harness_ranges") or {}, r.get("harness_streams") or {}
        note = "; ".join(n for n in hs.get("notes", []) if "markers" in n or "fill" in n or "unavailable" in n)
        print(f"{r['shape']:>10s} {_f(r.get('events_ms')):>8s} {_f(r.get('plain_cpu_cuda_ms')):>15s} "
              f"{_f(r.get('plain_cuda_ms')):>11s} {_f(r.get('ksum_ms')):>11s} {_f(hr.get('median_ms')):>15s} "
              f"{_f(hs.get('median_ms')):>16s}  {hs.get('method', '-')} {hs.get('status', '')} {note}")
    print(f"total {doc['seconds']} s; JSON: {a.out / 'cupti_cuda_only.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
