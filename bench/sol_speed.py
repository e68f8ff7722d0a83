"""Time solbench's SOL bounds for every workload of the dev problems, in one process per core.

Each worker process imports solbench once and serves whole problems from a queue (largest
first), computing both models' bounds for every workload (``sol.batch.problem_rows``: one
count per workload). Reports wall time for all dev workloads and the projection to the 3,957
workloads of SOL-ExecBench's 235 public problems (the dev set is every fourth problem, so its
mix of problem kinds is the public set's): projected = wall x 3957 / dev workloads.

    python bench/sol_speed.py [--data DIR] [--jobs 2] [--out bench/results/sol_speed.json]

Writes per-problem seconds, workloads, counting modes and errors to the JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DEFAULT_DATA = Path(os.environ.get("SOLBENCH_SHARED", ROOT.parent / "shared")) / "datasets" / "sol-execbench-dev"
PUBLIC_WORKLOADS = 3957


def _init():
    import torch

    torch.set_num_threads(1)
    from solbench.sol import batch  # noqa: F401 - import once per worker, not per problem


def _one(pdir: str) -> dict:
    from solbench.sol.batch import problem_rows
    from solbench.spec import load_problem

    t0 = time.perf_counter()
    try:
        p = load_problem(pdir)
        res = problem_rows(p, "B200", "solar")
        rows = res["workloads"]
        out = {"problem": pdir, "workloads": len(rows), "errors": sum(r.get("sol_ms") is None for r in rows),
               "modes": sorted({r.get("counting_mode", "-") for r in rows})}
    except Exception as e:  # noqa: BLE001 - a bench reports, never stops
        out = {"problem": pdir, "workloads": 0, "errors": 1, "error": f"{type(e).__name__}: {e}"}
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "sol_speed.json")
    ap.add_argument("--only", default=None)
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"dataset not found: {args.data}", file=sys.stderr)
        return 2
    pdirs = sorted(str(p.parent) for p in args.data.glob("*/*/definition.json"))
    if args.only:
        pdirs = [p for p in pdirs if args.only in p]
    # largest first, so the last problem to finish is a short one
    pdirs.sort(key=lambda d: -sum(1 for _ in open(Path(d) / "workload.jsonl")))
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs, initializer=_init, maxtasksperchild=None) as pool:
        rows = list(pool.imap_unordered(_one, pdirs))
    wall = time.perf_counter() - t0
    n = sum(r["workloads"] for r in rows)
    res = {"jobs": args.jobs, "cpu_count": os.cpu_count(), "problems": len(rows), "workloads": n,
           "errors": sum(r["errors"] for r in rows), "wall_s": round(wall, 1),
           "per_workload_ms": round(wall / max(n, 1) * 1e3, 1),
           "projected_public_s": round(wall * PUBLIC_WORKLOADS / max(n, 1), 1),
           "goal_public_s": 60, "rows": sorted(rows, key=lambda r: -r["seconds"])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    print(f"{n} workloads of {len(rows)} problems in {wall:.1f} s with {args.jobs} processes "
          f"({res['per_workload_ms']} ms each); projected for {PUBLIC_WORKLOADS}: "
          f"{res['projected_public_s']} s (goal 60 s); errors {res['errors']}")
    for r in res["rows"][:8]:
        print(f"  {r['seconds']:7.1f} s  {r['workloads']:3d} wl  {','.join(r.get('modes', []))}  {Path(r['problem']).name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
