"""Time solbench's SOL bounds for every workload of the dev problems, in one process per core.

Each worker process imports solbench once and serves tasks from a queue, largest first: a task
is up to ``--chunk`` consecutive workloads of one problem (so one large problem is spread over
the workers), whose bounds it computes in both models (``sol.batch.problem_rows``: one count
per workload). Prints the wall time for all dev workloads and the projection to the 3,957
workloads of SOL-ExecBench's 235 public problems (the dev set is every fourth problem, so its
mix of problem kinds is the public set's): projected = wall x 3957 / dev workloads.

    python bench/sol_speed.py [--data DIR] [--jobs 2] [--chunk 8] [--cache DIR]
        [--out bench/results/sol_speed.json]

``--cache DIR``: counts read from and stored in DIR (``sol.cache``): run twice for the cold and
the warm figure. Writes per-task wall and CPU seconds, workloads, counting modes and errors to
the JSON. On a shared machine the wall time includes the other tenants' load: the CPU seconds
of the workers, divided over the processes, estimate the idle-machine wall time (also
projected).
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
#: the dev dataset: $SOLBENCH_SHARED, ../shared beside the clone, shared/ or .devdata/ inside it
_DATA_CANDIDATES = [Path(os.environ["SOLBENCH_SHARED"]) / "datasets" / "sol-execbench-dev"] \
    if os.environ.get("SOLBENCH_SHARED") else []
_DATA_CANDIDATES += [ROOT.parent / "shared" / "datasets" / "sol-execbench-dev",
                     ROOT / "shared" / "datasets" / "sol-execbench-dev", ROOT / ".devdata" / "sol-execbench-dev"]
DEFAULT_DATA = next((d for d in _DATA_CANDIDATES if d.exists()), _DATA_CANDIDATES[0])
PUBLIC_WORKLOADS = 3957


def _init():
    import torch

    torch.set_num_threads(1)
    from solbench.sol import batch  # noqa: F401 - import once per worker, not per problem


def _reads_values(pdir: str) -> bool:
    """Does the reference read tensor values (``.item()``, ``.tolist()``)? Such problems count
    on real tensors, the slow ones: scheduled first. A guess from the source text only."""
    ref = json.loads((Path(pdir) / "definition.json").read_text()).get("reference", "")
    return ".item()" in ref or ".tolist()" in ref


def _one(task) -> dict:
    pdir, start, stop, cache_dir = task
    from solbench.sol.batch import problem_rows
    from solbench.spec import load_problem

    t0 = time.perf_counter()
    c0 = time.process_time()
    cache = None
    try:
        p = load_problem(pdir)
        if cache_dir:
            from solbench.sol.cache import CountsCache

            cache = CountsCache(cache_dir)
        res = problem_rows(p, "B200", "solar", p.workloads[start:stop], cache=cache)
        rows = res["workloads"]
        out = {"problem": pdir, "workloads": len(rows), "first": start,
               "errors": sum(r.get("sol_ms") is None for r in rows),
               "modes": sorted({r.get("counting_mode", "-") for r in rows})}
        if cache is not None:
            out["cache_hits"] = cache.hits
    except Exception as e:  # noqa: BLE001 - a bench reports, never stops
        out = {"problem": pdir, "workloads": 0, "first": start, "errors": 1, "error": f"{type(e).__name__}: {e}"}
    out["seconds"] = round(time.perf_counter() - t0, 3)
    out["cpu_seconds"] = round(time.process_time() - c0, 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "sol_speed.json")
    ap.add_argument("--only", default=None)
    ap.add_argument("--chunk", type=int, default=8, help="workloads per task (one problem's)")
    ap.add_argument("--cache", type=Path, default=None, help="counts cache directory (sol.cache)")
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"dataset not found: {args.data}", file=sys.stderr)
        return 2
    pdirs = sorted(str(p.parent) for p in args.data.glob("*/*/definition.json"))
    if args.only:
        pdirs = [p for p in pdirs if args.only in p]
    tasks = []
    for d in pdirs:
        n = sum(1 for line in open(Path(d) / "workload.jsonl") if line.strip())
        tasks += [(d, i, min(i + args.chunk, n), str(args.cache) if args.cache else None)
                  for i in range(0, n, args.chunk)]
    # data-dependent problems (the slow ones) first, then larger tasks: the last to finish is short
    tasks.sort(key=lambda t: (-_reads_values(t[0]), -(t[2] - t[1])))
    load0 = os.getloadavg()  # the machine is shared: the figures hold at this load
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs, initializer=_init, maxtasksperchild=None) as pool:
        rows = []
        for r in pool.imap_unordered(_one, tasks):
            rows.append(r)  # progress, so an interrupted run still shows where the time went
            print(f"[{time.perf_counter() - t0:6.0f}s] {Path(r['problem']).name} "
                  f"[{r['first']}:{r['first'] + r['workloads']}]: {r['workloads']} workloads, "
                  f"{r['seconds']:.1f} s wall, {r.get('cpu_seconds', 0):.1f} s CPU", flush=True)
    wall = time.perf_counter() - t0
    n = sum(r["workloads"] for r in rows)
    per_problem: dict[str, dict] = {}
    for r in rows:
        agg = per_problem.setdefault(r["problem"], {"problem": r["problem"], "workloads": 0, "errors": 0,
                                                     "seconds": 0.0, "cpu_seconds": 0.0, "modes": set()})
        for k in ("workloads", "errors", "seconds", "cpu_seconds"):
            agg[k] += r.get(k, 0)
        agg["modes"] |= set(r.get("modes", []))
        if r.get("error"):
            agg["error"] = r["error"]
    probs = sorted(({**a, "modes": sorted(a["modes"]), "seconds": round(a["seconds"], 3),
                     "cpu_seconds": round(a["cpu_seconds"], 3)} for a in per_problem.values()),
                   key=lambda a: -a["cpu_seconds"])
    res = {"jobs": args.jobs, "chunk": args.chunk, "cache": str(args.cache) if args.cache else None,
           "cache_hits": sum(r.get("cache_hits", 0) for r in rows),
           "cpu_count": os.cpu_count(), "load_average_after": os.getloadavg(),
           "load_average_before": load0, "problems": len(probs), "workloads": n,
           "errors": sum(r["errors"] for r in rows), "wall_s": round(wall, 1),
           "per_workload_ms": round(wall / max(n, 1) * 1e3, 1),
           "projected_public_s": round(wall * PUBLIC_WORKLOADS / max(n, 1), 1),
           "goal_public_s": 60, "rows": probs}
    # on a shared machine wall time measures the other tenants too: CPU seconds of the workers
    # (the tasks split over the jobs) are the figure for an idle machine
    cpu = sum(r.get("cpu_seconds", 0) for r in rows)
    res["cpu_s"] = round(cpu, 1)
    res["idle_wall_estimate_s"] = round(max(cpu / args.jobs, max((r.get("cpu_seconds", 0) for r in rows), default=0)), 1)
    res["projected_public_idle_s"] = round(res["idle_wall_estimate_s"] * PUBLIC_WORKLOADS / max(n, 1), 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    print(f"dev: {n} workloads of {len(probs)} problems in {wall:.1f} s wall with {args.jobs} processes "
          f"({res['per_workload_ms']} ms each; cache hits {res['cache_hits']}); errors {res['errors']}; "
          f"load average {load0[0]:.1f} before, {res['load_average_after'][0]:.1f} after")
    print(f"projected for the {PUBLIC_WORKLOADS} public workloads: {res['projected_public_s']} s wall "
          f"(goal {res['goal_public_s']} s)")
    print(f"CPU: {res['cpu_s']} s in all; on an idle machine about {res['idle_wall_estimate_s']} s with "
          f"{args.jobs} processes, projected {res['projected_public_idle_s']} s for {PUBLIC_WORKLOADS}")
    for r in probs[:10]:
        print(f"  {r['seconds']:7.1f} s wall {r['cpu_seconds']:7.1f} s CPU  {r['workloads']:3d} wl  "
              f"{','.join(r['modes'])}  {Path(r['problem']).name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
