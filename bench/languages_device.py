"""Every upstream SOL-ExecBench example (problem + solution, unchanged) through solbench: one
row per example with its language, status, latency against the eager reference and, when it
did not pass, the one-line reason (a missing toolchain names its `pip install 'solbench[...]'`,
an unsupported GPU says so).

Usage (the GPU machine; wheels for the toolchains installed first, see docs/languages.md):
    python bench/languages_device.py --out $OUT/languages
CPU smoke (C++/GPU-only languages end as one-line COMPILE_ERRORs):
    python bench/languages_device.py --device cpu --workloads 1 --iters 3 --out /tmp/lang

Writes OUT/languages.json (environment, toolchain probe per language, one record per example
with its per-workload traces' status / latency / reason) and OUT/traces.jsonl; prints the
table. An example that raises outside the harness is recorded with its error and the run
goes on.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: ../shared beside the clone (CI, developers) or shared/ inside it (the GPU machine's copy)
DEFAULT_EXAMPLES = next((p for p in (ROOT.parent / "shared" / "datasets" / "upstream-examples",
                                     ROOT / "shared" / "datasets" / "upstream-examples")
                         if p.is_dir()), ROOT.parent / "shared" / "datasets" / "upstream-examples")
#: the toolchain distributions the language plug-ins use (versions go in the record)
DISTS = ("torch", "triton", "nvidia-cutlass", "nvidia-cutlass-dsl", "nvidia-cudnn-frontend",
         "apache-tvm-ffi", "cuda-tile", "cuda-python", "cuda-bindings", "ninja")


def environment(device: str) -> dict:
    import importlib.metadata as md

    import torch

    from solbench.harness.languages.base import cuda_home, gpu_identity, tool_version

    env = {"python": sys.version.split()[0], "torch_cuda": torch.version.cuda, "device": device,
           "cuda_home": cuda_home(), "versions": {}}
    for d in DISTS:
        try:
            env["versions"][d] = md.version(d)
        except md.PackageNotFoundError:
            env["versions"][d] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        name, sm = gpu_identity(device)
        env.update(gpu=name, sm=sm, driver=torch.cuda.driver_version()
                   if hasattr(torch.cuda, "driver_version") else None)
    if cuda_home():
        env["nvcc"] = tool_version((str(Path(cuda_home()) / "bin" / "nvcc"), "--version"))
    return env


def toolchains(device: str) -> dict[str, str]:
    """Per registered language: 'ok' or the one-line reason it cannot build here."""
    from solbench.harness import languages
    from solbench.harness.languages import ToolchainMissing

    out = {}
    for name, lang in sorted(languages.LANGUAGES.items()):
        try:
            lang.check_device(device)
            lang.check_toolchain(None)
            out[name] = "ok"
        except ToolchainMissing as e:
            out[name] = str(e)
    return out


def _reason(ev) -> str:
    hacks = [f for f in ev.findings if f.severity == "hack"]
    if hacks:
        return f"{hacks[0].check}: {hacks[0].message}"
    corr = ev.correctness
    if corr is not None and corr.extra.get("failed_check"):
        return str(corr.extra["failed_check"])
    return (ev.log.strip().splitlines() or [""])[0][:300]


def run_example(sol_path: Path, device: str, args, traces_out) -> dict:
    from solbench.harness import EvalConfig
    from solbench.pipeline import evaluate_and_score
    from solbench.spec import Status, load_problem, load_solution

    lang_dir, name = sol_path.parent.parent.name, sol_path.parent.name
    rec = {"example": f"{lang_dir}/{name}", "solution_file": sol_path.name}
    t0 = time.perf_counter()
    try:
        problem = load_problem(sol_path.parent)
        sol = load_solution(sol_path, problem)
        rec.update(language=sol.spec.language.name, languages=sol.spec.languages,
                   solution=sol.name, definition=problem.name)
        cfg = EvalConfig(device=device, rounds=args.rounds)
        if args.iters:
            cfg.iters = args.iters
        if args.workloads:
            cfg.max_workloads = args.workloads
        traces = evaluate_and_score(problem, sol, cfg)
    except Exception as e:  # noqa: BLE001 - one example's failure is a row, not the end
        rec.update(status="ERROR", reason=f"{type(e).__name__}: {e}".splitlines()[0][:300],
                   traceback=traceback.format_exc()[-3000:], wall_s=time.perf_counter() - t0)
        return rec
    rows = []
    for t in traces:
        ev = t.evaluation
        perf = ev.performance
        rows.append({"workload": t.workload.uuid, "status": ev.status.value,
                     "latency_ms": perf.latency_ms if perf else None,
                     "reference_latency_ms": perf.reference_latency_ms if perf else None,
                     "speedup": perf.speedup_factor if perf else None,
                     "reason": "" if ev.status == Status.PASSED else _reason(ev)})
        traces_out.write(t.model_dump_json() + "\n")
    traces_out.flush()
    statuses = [r["status"] for r in rows]
    passed = statuses.count("PASSED")
    worst = next((r for r in rows if r["status"] != "PASSED"), None)
    sp = [r["speedup"] for r in rows if r["speedup"]]
    rec.update(
        workloads=rows, passed=passed, total=len(rows),
        status="PASSED" if rows and passed == len(rows) else (worst["status"] if worst else "NO_WORKLOADS"),
        reason=worst["reason"] if worst else "",
        latency_ms=_median([r["latency_ms"] for r in rows]),
        reference_latency_ms=_median([r["reference_latency_ms"] for r in rows]),
        speedup_geomean=math.exp(statistics.fmean(math.log(s) for s in sp)) if sp else None,
        wall_s=time.perf_counter() - t0)
    return rec


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _f(x, spec=".4g"):
    return "-" if x is None else format(x, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=Path, default=DEFAULT_EXAMPLES,
                    help="upstream examples root (<language>/<name>/solution_*.json)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when present)")
    ap.add_argument("--only", default="", help="comma-separated languages or language/name")
    ap.add_argument("--workloads", type=int, default=0, help="first N workloads per example (0: all)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=0, help="timed iterations (0: solbench's default)")
    ap.add_argument("--budget-s", type=float, default=540,
                    help="start no new example after this many seconds (the rest are listed as "
                         "SKIPPED; rerun them with --only)")
    args = ap.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        device = "cuda:0"
    sols = sorted(args.examples.glob("*/*/solution_*.json"))
    if not sols:
        print(f"no examples under {args.examples} (expected <language>/<name>/solution_*.json)",
              file=sys.stderr)
        return 2
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    if only:
        sols = [s for s in sols if s.parent.parent.name in only
                or f"{s.parent.parent.name}/{s.parent.name}" in only]
    args.out.mkdir(parents=True, exist_ok=True)
    env, tools = environment(device), toolchains(device)
    con = Console(width=200)
    con.print(f"environment: {json.dumps(env)}")
    for name, why in tools.items():
        con.print(f"  toolchain {name:15s} {escape(why)}")
    records = []
    t_start = time.perf_counter()
    with open(args.out / "traces.jsonl", "w") as traces_out:
        for sp in sols:
            if time.perf_counter() - t_start > args.budget_s:
                rec = {"example": f"{sp.parent.parent.name}/{sp.parent.name}", "status": "SKIPPED",
                       "reason": f"--budget-s {args.budget_s:.0f} spent", "wall_s": 0.0}
            else:
                rec = run_example(sp, device, args, traces_out)
            records.append(rec)
            con.print(f"{rec['example']}: {rec['status']} ({rec.get('passed', 0)}/{rec.get('total', 0)}) "
                      f"{escape(rec.get('reason', ''))} [{rec['wall_s']:.0f} s]")
            (args.out / "languages.json").write_text(json.dumps(
                {"environment": env, "toolchains": tools, "examples": records}, indent=1, default=str))
    tb = Table(title=f"upstream examples on {env.get('gpu', device)}")
    for col in ("language", "example", "status", "passed", "latency ms", "ref ms", "speedup", "reason"):
        tb.add_column(col, overflow="fold")
    for r in records:
        tb.add_row(r.get("language", r["example"].split("/")[0]), r["example"], r["status"],
                   f"{r.get('passed', 0)}/{r.get('total', 0)}", _f(r.get("latency_ms")),
                   _f(r.get("reference_latency_ms")), _f(r.get("speedup_geomean"), ".3g"),
                   escape(r.get("reason", "")[:150]))
    con.print(tb)
    con.print(f"wrote {args.out / 'languages.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
