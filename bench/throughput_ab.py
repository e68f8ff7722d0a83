"""Before / after of the spare-worker pool: the same live run with ``--spare-workers 0`` (every
worker starts when it is needed: the harness before the pool) and with the pool, alternated
``--reps`` times so a machine's load drift hits both arms, then one table per phase.

Each arm is ``bench/throughput.py --live`` (reference as candidate, ``--copies N`` copies of
each problem's first workload as one pair), so a run has one pair per problem and
``worker start`` shows what a pair pays before its first workload: with the pool, the wait for
spares started while the previous problem ran, plus the build.

Usage (CPU here; on the GPU machine ``--device cuda`` and the dev dataset):
    python bench/throughput_ab.py --live l1 --only softmax_fp32,elu_fp32,cumsum_fp32,argmax_dim_fp32,avg_pool1d_fp32 \\
        --tag cpu --copies 6 --device cpu --seed 7 --reps 2 --out bench/results/throughput_ab_cpu
    python bench/throughput_ab.py --live ../shared/datasets/sol-execbench-dev --device cuda --copies 8 \\
        --max-problems 4 --seed 0x5eed --reps 1 --out $OUT/throughput_ab
Writes OUT.json (every arm's figures, per pair worker starts) and OUT.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = ["worker start", "correctness", "timed calls (host)", "reference rest", "timing rest", "inputs",
        "kernels", "total", "overhead steady"]


def arm(args, spares: int, rep: int) -> dict:
    out = args.out.parent / f"{args.out.name}_r{rep}_spare{spares}"
    cmd = [sys.executable, str(ROOT / "bench" / "throughput.py"), "--live", args.live, "--device", args.device,
           "--copies", str(args.copies), "--spare-workers", str(spares), "--budget-s", str(args.budget_s),
           "--out", str(out)]
    for flag, v in (("--only", args.only), ("--seed", args.seed), ("--skip", args.skip),
                    ("--max-problems", args.max_problems), ("--iters", args.iters)):
        if v:
            cmd += [flag, str(v)]
    for t in args.tag or []:
        cmd += ["--tag", t]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    import shutil

    for d in ("problems", "solutions"):  # copies of the inputs, made again by a rerun
        shutil.rmtree(Path(str(out) + "_run") / d, ignore_errors=True)
    res = json.loads(Path(str(out) + ".json").read_text())
    lab = next(iter(res["labels"].values()))
    starts = []
    for line in (Path(str(out) + "_run") / "results.jsonl").read_text().splitlines():
        t = json.loads(line)
        p = t["evaluation"].get("phases_s") or {}
        if p.get("worker_start"):
            starts.append([t["definition"], p["worker_start"], p.get("ref_timing.worker", 0.0)])
    return {"spare_workers": spares, "rep": rep, "wall_s": res.get("live_wall_s"),
            "traces": lab["traces"], "pairs": lab["pairs"], "per_pair_s": lab["per_pair_s"],
            "per_workload_steady_s": lab["per_workload_steady_s"],
            "projected_pass_h": lab["projected_pass_h"],
            "phases_mean": {k: lab["phases"][k]["mean"] for k in ROWS},
            "phases_median": {k: lab["phases"][k]["median"] for k in ROWS},
            "pair_starts": starts}


def table(runs: list[dict]) -> str:
    by = {0: [r for r in runs if r["spare_workers"] == 0], 1: [r for r in runs if r["spare_workers"] > 0]}
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    lines = ["| s (median over reps of each run's figure) | before (--spare-workers 0) | after (pool) |",
             "|---|---|---|"]
    for k in ("wall_s", "per_pair_s", "per_workload_steady_s", "projected_pass_h"):
        lines.append(f"| {k} | {med([r[k] for r in by[0]]):.2f} | {med([r[k] for r in by[1]]):.2f} |")
    for k in ROWS:
        lines.append(f"| {k}, mean per workload | {med([r['phases_mean'][k] for r in by[0]]):.3f} | "
                     f"{med([r['phases_mean'][k] for r in by[1]]):.3f} |")
    for side, rs in (("before", by[0]), ("after", by[1])):
        for r in rs:
            lines.append(f"\n{side}, rep {r['rep']}: worker start of each pair (s, in run order: the "
                         "first pair has no spare to take): "
                         + ", ".join(f"{d} {w:.2f}" for d, w, _ in r["pair_starts"]))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--live", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--copies", type=int, default=6)
    ap.add_argument("--spares", type=int, default=2, help="--spare-workers of the 'after' arm")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--skip", default="")
    ap.add_argument("--tag", action="append", default=None)
    ap.add_argument("--seed", default=None)
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--max-problems", type=int, default=None)
    ap.add_argument("--budget-s", type=float, default=900.0)
    args = ap.parse_args(argv)
    runs = []
    for rep in range(1, args.reps + 1):
        for n in ((0, args.spares) if rep % 2 else (args.spares, 0)):
            runs.append(arm(args, n, rep))
    md = table(runs)
    cmd = " ".join(["python", "bench/throughput_ab.py"] + (argv or sys.argv[1:]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(str(args.out) + ".json").write_text(json.dumps({"command": cmd, "runs": runs}, indent=1))
    Path(str(args.out) + ".md").write_text(f"`{cmd}`\n\n{md}\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
