"""Every upstream SOL-ExecBench example (problem + solution, unchanged) through solbench: one
row per example with its language, status, latency against the eager reference and, when it
did not pass, the one-line reason (a missing toolchain names its `pip install 'solbench[...]'`,
an unsupported GPU says so).

Two phases. First every C++-family example is compiled ahead of time, ``--build-jobs`` at
once, each in a sandboxed worker of its own through the worker's normal build step
(solbench.harness.prebuild), into a shared build cache (``--build-cache``). Then the
examples are evaluated one after another (no two ever time on the GPU together, and no
build runs while one times); each candidate worker loads its module from the shared cache
(``build_cache: shared`` in its row) instead of compiling it again.

Usage (the GPU machine; wheels for the toolchains installed first, see docs/languages.md):
    python bench/languages_device.py --out $OUT/languages --workloads 1
CPU smoke (C++/GPU-only languages end as one-line COMPILE_ERRORs):
    python bench/languages_device.py --device cpu --workloads 1 --iters 3 --out /tmp/lang

Writes OUT/languages.json (environment with the sandbox in use, toolchain probe per language,
the ahead-of-time build of each example, one record per example with its per-workload
traces' status / latency / reason) and OUT/traces.jsonl, both rewritten after every example
(a time cap loses nothing done); prints the table. An example that raises outside the
harness is recorded with its error and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import threading
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

    from solbench.languages.base import cuda_home, gpu_identity, tool_version

    from solbench.harness.sandbox import sandbox_status

    env = {"python": sys.version.split()[0], "torch_cuda": torch.version.cuda, "device": device,
           "cuda_home": cuda_home(), "versions": {}, "sandbox": sandbox_status(device)}
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
    from solbench import languages
    from solbench.languages import ToolchainMissing

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


def load_example(sol_path: Path) -> tuple[dict, object, object]:
    """(record, problem, solution) of one example; problem and solution are None (and the
    record says why) when it does not load."""
    from solbench.spec import load_problem, load_solution

    lang_dir, name = sol_path.parent.parent.name, sol_path.parent.name
    rec = {"example": f"{lang_dir}/{name}", "solution_file": sol_path.name, "language": lang_dir}
    try:
        problem = load_problem(sol_path.parent)
        sol = load_solution(sol_path, problem)
    except Exception as e:  # noqa: BLE001 - a bad example is a row
        rec.update(status="ERROR", reason=f"{type(e).__name__}: {e}".splitlines()[0][:300],
                   wall_s=0.0)
        return rec, None, None
    rec.update(language=sol.spec.language.name, languages=sol.spec.languages,
               solution=sol.name, definition=problem.name)
    return rec, problem, sol


def make_config(device: str, args):
    from solbench.harness import EvalConfig

    return EvalConfig(device=device, rounds=args.rounds, iters=args.iters or None,
                      max_workloads=args.workloads or None)


def run_example(rec: dict, problem, sol, device: str, args, traces_out) -> dict:
    from solbench.run.session import evaluate_and_score
    from solbench.spec import Status

    t0 = time.perf_counter()
    try:
        traces = evaluate_and_score(problem, sol, make_config(device, args))
    except Exception as e:  # noqa: BLE001 - one example's failure is a row, not the end
        rec.update(status="ERROR", reason=f"{type(e).__name__}: {e}".splitlines()[0][:300],
                   traceback=traceback.format_exc()[-3000:], wall_s=time.perf_counter() - t0)
        return rec
    rows = []
    for t in traces:
        ev = t.evaluation
        perf = ev.performance
        ph = ev.phases_s or {}
        rows.append({"workload": t.workload.uuid, "status": ev.status.value,
                     "latency_ms": perf.latency_ms if perf else None,
                     "reference_latency_ms": perf.reference_latency_ms if perf else None,
                     "speedup": perf.speedup_factor if perf else None,
                     "build_cache": ev.build_cache,
                     "worker_start_s": ph.get("worker_start"), "build_s": ph.get("build"),
                     "sandbox": (ev.environment.sandbox or {}).get("mode")
                     if ev.environment and ev.environment.sandbox else None,
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
        build_cache=next((r["build_cache"] for r in rows if r["build_cache"]), None),
        sandbox=next((r["sandbox"] for r in rows if r["sandbox"]), None),
        wall_s=time.perf_counter() - t0)
    return rec


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _f(x, spec=".4g"):
    return "-" if x is None else format(x, spec)


def _build_cell(r: dict) -> str:
    """``prebuilt 41s -> shared``: the ahead-of-time build and where the evaluation's module
    came from; '-' for Python languages."""
    pre = r.get("prebuild") or {}
    parts = []
    if pre.get("status") and pre["status"] != "skipped":
        parts.append(f"{pre['status']} {pre.get('seconds', 0):.0f}s")
    if r.get("build_cache"):
        parts.append(f"-> {r['build_cache']}")
    return " ".join(parts) or "-"


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
                    help="start no new example after this many seconds from the start (the rest "
                         "are listed as SKIPPED; rerun them with --only)")
    ap.add_argument("--build-jobs", type=int, default=4,
                    help="C++ examples compiled at once ahead of the evaluations (0: no "
                         "ahead-of-time builds; each compiles in its candidate worker)")
    ap.add_argument("--build-cache", type=Path, default=None,
                    help="shared build cache (default: a fresh folder under the temp dir)")
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
    cache = args.build_cache or Path(tempfile.mkdtemp(prefix="solbench-builds-"))
    # before any worker starts: every worker sees it (read-only), the builds write into it
    os.environ["SOLBENCH_BUILD_CACHE"] = str(cache)
    env, tools = environment(device), toolchains(device)
    env["build_cache"] = str(cache)
    con = Console(width=200)
    con.print(f"environment: {json.dumps(env)}")
    for name, why in tools.items():
        con.print(f"  toolchain {name:15s} {escape(why)}")
    t_start = time.perf_counter()
    loaded = [load_example(sp) for sp in sols]
    records = [rec for rec, _, _ in loaded]
    lock = threading.Lock()

    def save() -> None:
        with lock:
            tmp = args.out / "languages.json.tmp"
            tmp.write_text(json.dumps({"environment": env, "toolchains": tools,
                                       "examples": records}, indent=1, default=str))
            tmp.replace(args.out / "languages.json")

    # phase 1: the C++ examples' builds, in parallel, before anything is timed
    cpp = [i for i, (rec, prob, sol) in enumerate(loaded) if sol is not None and sol.spec.is_cpp]
    if args.build_jobs > 0 and cpp:
        from solbench.harness.prebuild import prebuild_many

        def built(k: int, r: dict) -> None:
            rec = records[cpp[k]]
            rec["prebuild"] = r
            con.print(f"build {rec['example']}: {r['status']} in {r['seconds']:.0f} s "
                      f"{escape(r.get('reason', ''))}")
            save()

        t_b = time.perf_counter()
        cfg = make_config(device, args)
        prebuild_many([(loaded[i][1], loaded[i][2]) for i in cpp], cfg, jobs=args.build_jobs,
                      on_done=built)
        env["prebuild_wall_s"] = round(time.perf_counter() - t_b, 1)
        con.print(f"ahead-of-time builds: {len(cpp)} in {env['prebuild_wall_s']:.0f} s")
    save()
    # phase 2: the evaluations, one after another
    with open(args.out / "traces.jsonl", "w") as traces_out:
        for rec, prob, sol in loaded:
            if sol is None:
                pass
            elif time.perf_counter() - t_start > args.budget_s:
                rec.update(status="SKIPPED", reason=f"--budget-s {args.budget_s:.0f} spent",
                           wall_s=0.0)
            else:
                run_example(rec, prob, sol, device, args, traces_out)
            con.print(f"{rec['example']}: {rec['status']} ({rec.get('passed', 0)}/{rec.get('total', 0)}) "
                      f"{escape(rec.get('reason', ''))} [{rec['wall_s']:.0f} s, build {_build_cell(rec)}]")
            save()
    env["total_wall_s"] = round(time.perf_counter() - t_start, 1)
    save()
    tb = Table(title=f"upstream examples on {env.get('gpu', device)} "
                     f"(sandbox {env['sandbox'].get('mode')})")
    for col in ("example", "language", "status", "passed", "latency ms", "ref ms", "speedup",
                "build", "reason"):
        tb.add_column(col, overflow="fold")
    for r in records:
        tb.add_row(r["example"], r.get("language", ""), r["status"],
                   f"{r.get('passed', 0)}/{r.get('total', 0)}", _f(r.get("latency_ms")),
                   _f(r.get("reference_latency_ms")), _f(r.get("speedup_geomean"), ".3g"),
                   _build_cell(r), escape(r.get("reason", "")[:150]))
    con.print(tb)
    con.print(f"wrote {args.out / 'languages.json'} ({env['total_wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
