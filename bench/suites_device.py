"""A suite through `solbench run` with the three baseline candidates: eager (the reference),
torch.compile (`solbench baseline --compile`) and the hand-written Triton candidates.

Usage (one process per GPU, each with its own shard):
    CUDA_VISIBLE_DEVICES=0 python bench/suites_device.py --suite l1 --shard 0/2 --out $OUT/l1_0
    CUDA_VISIBLE_DEVICES=1 python bench/suites_device.py --suite l1 --shard 1/2 --out $OUT/l1_1
CPU smoke: python bench/suites_device.py --suite l1 --device cpu --problem 'relu_*' --tag cpu \
    --out /tmp/x --labels eager,compile --backend aot_eager

Writes OUT/solutions_<phase>/<problem>/<label>.json (the candidates), OUT/results.jsonl
(traces, appended pair by pair, so a run cut short by --budget-s keeps what it finished and a
rerun resumes it), OUT/labels.json (solution hash -> label), OUT/run_<phase>.log and
OUT/summary_<phase>.json; `bench/suites_summary.py` turns
one or more such OUT dirs into the summary table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_candidates(suite: str, sols: Path, labels: list[str], backend: str,
                     problem_globs: list[str]) -> dict[str, str]:
    """Write SOLS/<problem>/<label>.json; return {solution hash: label}."""
    import fnmatch

    from solbench.spec import load_problem, reference_solution
    from solbench.suites import suite_problems
    from solbench.suites.baseline import compile_baseline

    packaged = ROOT / "src" / "solbench" / "suites" / "solutions" / suite
    hashes: dict[str, str] = {}
    for pdir in suite_problems(suite):
        if problem_globs and not any(fnmatch.fnmatch(pdir.name, g) for g in problem_globs):
            continue
        prob = load_problem(pdir)
        d = sols / prob.name
        d.mkdir(parents=True, exist_ok=True)
        made = {}
        if "eager" in labels:
            made["eager"] = reference_solution(prob)
        if "compile" in labels:
            made["compile"] = compile_baseline(prob, backend=backend)
        for lab, sol in made.items():
            (d / f"{lab}.json").write_text(json.dumps(sol.model_dump(mode="json", exclude_none=True)))
        if "triton" in labels and (packaged / prob.name / "triton.json").exists():
            shutil.copy(packaged / prob.name / "triton.json", d / "triton.json")
    # labels by the hash the runner keys results on
    from solbench.run.plan import candidate_files, load_candidate

    for pdir in suite_problems(suite):
        if not (sols / pdir.name).is_dir():
            continue
        prob = load_problem(pdir)
        for f in candidate_files(sols, prob):
            c = load_candidate(f, prob)
            hashes[c.solution_hash] = c.label
    return hashes


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--labels", default="eager+triton,compile",
                    help="candidate labels; '+' joins labels of one phase, ',' separates phases "
                         "(each phase is one `solbench run`, so a budget cut loses the last phase, "
                         "not the last problems)")
    ap.add_argument("--backend", default="inductor", help="torch.compile backend of the compile candidate")
    ap.add_argument("--shard", default=None, help="I/N")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--problem", action="append", default=[], help="glob (repeatable)")
    ap.add_argument("--tag", action="append", default=[])
    ap.add_argument("--exclude-tag", action="append", default=None,
                    help="default: cpu on CUDA (time the model-size workloads)")
    ap.add_argument("--max-workloads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--budget-s", type=float, default=500.0)
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    phases = [[x for x in ph.split("+") if x] for ph in args.labels.split(",") if ph]
    t0 = time.time()
    hashes: dict[str, str] = {}
    for k, labels in enumerate(phases):
        hashes.update(build_candidates(args.suite, out / f"solutions_{k}", labels, args.backend,
                                       args.problem))
    (out / "labels.json").write_text(json.dumps(hashes, indent=1))
    print(f"candidates: {len(hashes)} in {time.time() - t0:.1f} s", flush=True)

    dev = args.device
    if dev == "auto":
        import torch

        dev = "cuda" if torch.cuda.is_available() else "cpu"
    excl = args.exclude_tag if args.exclude_tag is not None else (["cpu"] if dev == "cuda" else [])
    for k, labels in enumerate(phases):
        cmd = [sys.executable, "-m", "solbench", "run", args.suite, "--solutions",
               str(out / f"solutions_{k}"), "-o", str(out / "results.jsonl"), "--resume",
               "--device", dev, "--json", "--max-workloads", str(args.max_workloads)]
        for t in args.tag:
            cmd += ["--tag", t]
        for t in excl:
            cmd += ["--exclude-tag", t]
        for g in args.problem:
            cmd += ["--problem", g]
        if args.shard:
            cmd += ["--shard", args.shard]
        if args.iters:
            cmd += ["--iters", str(args.iters)]
        left = args.budget_s - (time.time() - t0)
        if left < 10:
            print(f"phase {'+'.join(labels)}: no budget left", flush=True)
            continue
        print(" ".join(cmd), flush=True)
        with open(out / f"run_{k}.log", "w") as log:
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, timeout=left,
                                   env=dict(os.environ, PYTHONUNBUFFERED="1"))
                (out / f"summary_{k}.json").write_bytes(p.stdout)
                print(f"phase {'+'.join(labels)}: solbench run exit {p.returncode} after "
                      f"{time.time() - t0:.0f} s", flush=True)
            except subprocess.TimeoutExpired:
                print(f"phase {'+'.join(labels)}: budget reached after {time.time() - t0:.0f} s; "
                      "results so far kept", flush=True)
    n = sum(1 for _ in open(out / "results.jsonl")) if (out / "results.jsonl").exists() else 0
    print(f"{n} traces in {out / 'results.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
