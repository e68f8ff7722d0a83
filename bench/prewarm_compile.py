"""Fill torch.compile's on-disk caches (inductor FX graph / AOTAutograd / Triton) for the
torch.compile baseline candidates of a suite run, in parallel, before the run times them.

Why: a compile candidate's first call in a fresh worker compiles (8-11 s a pair on the H200,
bench/results/suites_device/dlrm_0, `phases_s.correctness`), one pair after another on one
lane. The compile is untimed warm-up, so moving it off the critical path changes no figure:
the worker still compiles in-process, it just finds the artefacts cached (same user, same
cache directories, same device properties). A cache miss only costs the old time.

Usage (the solutions dir that bench/suites_device.py wrote for the compile phase):
    python bench/prewarm_compile.py --suite l1 --solutions OUT/solutions_1 --shard 0/2 --jobs 6

Prints one line per candidate (seconds, or the error) and a total; exit 0 whatever the
candidates do (a failing candidate fails again, recorded, in the timed run).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
import traceback
from pathlib import Path


def _warm(job: tuple[str, str, list[str], str]) -> str:
    problem_path, sol_path, uuids, device = job
    t0 = time.perf_counter()
    try:
        import torch

        from solbench.harness.build import load_entry
        from solbench.inputs import make_inputs
        from solbench.spec import load_problem
        from solbench.suites.runner import load_candidate

        prob = load_problem(Path(problem_path))
        cand = load_candidate(Path(sol_path), prob)
        if cand.solution is None:
            return f"{prob.name}: load error {cand.load_error[:200]}"
        fn, _ = load_entry(cand.solution, device, tuple(prob.init_args), prob.init_seed, 600)
        if cand.solution.spec.destination_passing_style:
            return f"{prob.name}: DPS candidate, skipped"
        for w in prob.workloads:
            if w.uuid not in uuids:
                continue
            args = list(make_inputs(prob, w, 12345, device).values())
            with torch.no_grad():
                for _ in range(2):
                    fn(*args)
            torch.cuda.synchronize() if device.startswith("cuda") else None
        return f"{prob.name}: {time.perf_counter() - t0:.1f} s"
    except Exception as e:  # noqa: BLE001 - report and go on
        return f"{Path(problem_path).name}: {type(e).__name__}: {e}"[:300] + \
            ("\n" + traceback.format_exc()[-600:] if "-v" in sys.argv else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", required=True)
    ap.add_argument("--solutions", type=Path, required=True)
    ap.add_argument("--label", default="compile")
    ap.add_argument("--shard", default=None, help="I/N, as bench/suites_device.py")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--max-workloads", type=int, default=1)
    ap.add_argument("--exclude-tag", action="append", default=None)
    ap.add_argument("--tag", action="append", default=[])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    from solbench.suites import suite_problems
    from solbench.suites.runner import plan_run

    shard = tuple(int(x) for x in args.shard.split("/")) if args.shard else None
    excl = args.exclude_tag if args.exclude_tag is not None else (["cpu"] if args.device != "cpu" else [])
    plan = plan_run(suite_problems(args.suite), args.solutions, set(), tags=args.tag,
                    workload_limit=args.max_workloads, exclude_tags=excl, shard=shard)
    jobs = [(str(p.problem.path), str(p.candidate.path), [w.uuid for w in p.todo], args.device)
            for p in plan.pairs if p.candidate.label == args.label and p.todo]
    t0 = time.time()
    ctx = mp.get_context("spawn")
    with ctx.Pool(max(1, args.jobs), maxtasksperchild=4) as pool:
        for line in pool.imap_unordered(_warm, jobs):
            print("prewarm", line, flush=True)
    print(f"prewarm: {len(jobs)} candidates in {time.time() - t0:.0f} s with {args.jobs} jobs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
