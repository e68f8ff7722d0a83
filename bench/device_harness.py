"""Device run of the harness: `solbench eval`'s pipeline on the dev dataset with the reference
as candidate (all four subsets; FlashInfer problems without blobs end as INVALID_REFERENCE
with a clear message), plus the Triton and CUDA C++ example candidates.

Usage: python bench/device_harness.py --out DIR [--per-problem 2] [--iters 20]
Writes DIR/device_harness.jsonl (traces) and DIR/device_harness.json (summary rows).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "sol-execbench-dev"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--per-problem", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--max-problems", type=int, default=100)
    ap.add_argument("--time-budget-s", type=float, default=420)
    ap.add_argument("--no-ref-timing", action="store_true",
                    help="skip timing the eager reference (it is the candidate here)")
    ap.add_argument("--skip", default="", help="comma-separated problem names to leave out")
    ap.add_argument("--no-examples", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from solbench.harness import EvalConfig
    from solbench.run.session import evaluate_and_score
    from solbench.spec import load_problem, load_solution, reference_solution
    from solbench.store import append_traces

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tr_path = out / "device_harness.jsonl"
    if tr_path.exists():
        tr_path.unlink()
    rows = []
    t_start = time.time()
    jobs = []
    ex = Path(__file__).resolve().parents[1] / "examples" / "solutions" / "024_rmsnorm_h2048"
    data = Path(args.data)
    rms = data / "FlashInfer-Bench" / "024_rmsnorm_h2048"
    if rms.exists() and not args.no_examples:
        for s in ("triton.json", "cuda.json"):
            jobs.append((rms, ex / s))
    dirs = sorted(p for p in data.glob("*/*") if (p / "definition.json").exists())
    # interleave subsets so a time budget still covers all four
    by_subset: dict[str, list[Path]] = {}
    for d in dirs:
        by_subset.setdefault(d.parent.name, []).append(d)
    order = []
    while any(by_subset.values()):
        for k in sorted(by_subset):
            if by_subset[k]:
                order.append(by_subset[k].pop(0))
    skip = {x for x in args.skip.split(",") if x}
    jobs += [(d, None) for d in order if d.name not in skip][: args.max_problems]
    for pdir, sol_path in jobs:
        if time.time() - t_start > args.time_budget_s:
            rows.append({"problem": pdir.name, "skipped": "time budget"})
            continue
        t0 = time.time()
        try:
            prob = load_problem(pdir)
            sol = load_solution(sol_path, prob) if sol_path else reference_solution(prob)
            ws = prob.smallest_workloads(args.per_problem, max_bytes=4 << 30)
            cfg = EvalConfig(device=dev, workloads=[w.uuid for w in ws], iters=args.iters,
                             reference_timing=not args.no_ref_timing or sol_path is not None)
            traces = evaluate_and_score(prob, sol, cfg)
            append_traces(tr_path, traces)
            for t in traces:
                ev = t.evaluation
                rows.append({
                    "subset": pdir.parent.name, "problem": prob.name, "solution": sol.name,
                    "workload": t.workload.uuid, "status": ev.status.value,
                    "latency_ms": ev.performance.latency_ms if ev.performance else None,
                    "reference_ms": ev.performance.reference_latency_ms if ev.performance else None,
                    "method": ev.timing.method if ev.timing else None,
                    "event_vs": ev.timing.notes if ev.timing else None,
                    "sol_ms": ev.sol.sol_ms if ev.sol else None, "score": ev.sol.score if ev.sol else None,
                    "findings": [f"{f.check}:{f.severity}" for f in ev.findings],
                    "log": ev.log[-300:] if ev.status.value != "PASSED" else "",
                })
        except Exception as e:  # noqa: BLE001 - keep going, record the failure
            rows.append({"problem": pdir.name, "error": f"{type(e).__name__}: {e}"})
        print(f"{pdir.name}: {time.time() - t0:.1f} s", flush=True)
    print()
    print(f"{'problem':52s} {'solution':28s} {'status':18s} {'ms':>9s} {'ref ms':>9s} {'SOL ms':>9s} {'score':>6s} findings")
    for r in rows:
        if "status" not in r:
            print(f"{r['problem'][:52]:52s} {r.get('error') or r.get('skipped')}")
            continue
        f = lambda v, s=".4f": "-" if v is None else format(v, s)  # noqa: E731
        print(f"{r['problem'][:52]:52s} {r['solution'][:28]:28s} {r['status']:18s} {f(r['latency_ms'])} "
              f"{f(r['reference_ms'])} {f(r['sol_ms'])} {f(r['score'], '.3f'):>6s} {','.join(r['findings'])} {r['log'][-120:]!r}")
    (out / "device_harness.json").write_text(json.dumps(rows, indent=1))
    n_pass = sum(r.get("status") == "PASSED" for r in rows)
    print(f"\n{n_pass}/{sum('status' in r for r in rows)} workloads PASSED; "
          f"{len({r['problem'] for r in rows if r.get('status') == 'PASSED'})} problems with a PASSED workload")
    return 0


if __name__ == "__main__":
    sys.exit(main())
