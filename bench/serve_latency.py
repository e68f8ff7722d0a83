"""Latency of ``solbench serve`` against a local ``solbench eval``: the same candidate, the same
problem and workloads, the same seed, alternated so a machine's load drift hits both arms.

Arms, each timed from the command's start to its exit (wall):
- ``local``: ``solbench eval PROBLEM --solution SOL -w W --seed S --json`` (process start, import,
  worker start, SOL, evaluation, exit);
- ``cli+server``: the same command with ``--server URL`` (the client process still starts,
  imports and loads the problem: what an agent that shells out pays);
- ``client``: :class:`solbench.serve.client.ServeClient` in this process (what a Python RL loop
  pays): the submission's round trip.
The first server evaluation of a problem is reported apart (``client first``: the server
starts the problem's reference worker, builds its reference, counts or reads its SOL bounds).
For each client evaluation the trace's ``phases_s`` split the wall into the candidate's build,
correctness, timing (both sides' interleaved blocks) and the rest (``overhead``: the issue's
"at most 1 s plus the candidate's own build and timed work" is ``wall - build - timing``).

Usage (CPU here; on the GPU machine ``--device cuda``):
    python bench/serve_latency.py --device cpu --problem l1/softmax_fp32 --reps 3 --warm 8 \\
        --out bench/results/serve_latency_cpu
    python bench/serve_latency.py --device cuda --problem l1/softmax_fp32 --reps 3 --warm 10 \\
        --out $OUT/serve_latency_h100
Writes OUT.json (every run's figures) and OUT.md (the table). Every step runs under a timeout
(``--step-timeout``) and prints as it finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HONEST = "import torch\n\n\ndef run(x):\n    return torch.softmax(x, dim=1)\n"


def say(*a) -> None:
    print(*a, flush=True)


def start_server(args, env) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "solbench.cli", "serve", "--port", "0", "--device", args.device,
           "--spares", str(args.spares)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://\S+?):(\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r} {proc.stderr.read()[-2000:]}")
    say(f"server up in {time.perf_counter() - t0:.1f} s: {line.strip()}")
    return proc, f"{m.group(1)}:{m.group(2)}"


def run_cli(args, env, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "solbench.cli", "eval", args.problem, "--solution", str(args.solution),
           "-w", args.workloads, "--device", args.device, "--seed", str(args.seed), "--json", "-q", *extra]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.step_timeout)
    except subprocess.TimeoutExpired:
        return {"wall_s": None, "error": f"timed out after {args.step_timeout} s"}
    wall = time.perf_counter() - t0
    try:
        traces = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"wall_s": wall, "error": (p.stderr or p.stdout)[-500:]}
    return {"wall_s": wall, **summarize(traces)}


def summarize(traces: list[dict]) -> dict:
    ph = [t["evaluation"].get("phases_s") or {} for t in traces]
    return {"status": [t["evaluation"]["status"] for t in traces],
            "build_s": sum(p.get("build", 0.0) for p in ph),
            "worker_start_s": sum(p.get("worker_start", 0.0) for p in ph),
            "correctness_s": sum(p.get("correctness", 0.0) for p in ph),
            "timing_s": sum(p.get("timing", 0.0) for p in ph)}


def run_client(client, args) -> dict:
    t0 = time.perf_counter()
    traces = client.evaluate(args.problem, args.solution, workloads=_workloads(args.workloads),
                             device=args.device, seed=args.seed)
    wall = time.perf_counter() - t0
    s = summarize([t.model_dump(mode="json") for t in traces])
    s["overhead_s"] = wall - s["build_s"] - s["timing_s"]
    return {"wall_s": wall, **s}


def _workloads(spec: str) -> list:
    out: list = []
    for part in spec.split(","):
        if "-" in part and part.replace("-", "").isdigit():
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part) if part.isdigit() else part)
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--problem", default="l1/softmax_fp32")
    ap.add_argument("--solution", type=Path, default=None, help="candidate (default: an honest softmax)")
    ap.add_argument("-w", "--workloads", default="0")
    ap.add_argument("--seed", default="7")
    ap.add_argument("--reps", type=int, default=3, help="local / cli+server pairs, alternated")
    ap.add_argument("--warm", type=int, default=8, help="client evaluations after the first")
    ap.add_argument("--spares", type=int, default=3)
    ap.add_argument("--gap", type=float, default=0.0,
                    help="seconds between client evaluations (an agent's think time)")
    ap.add_argument("--step-timeout", type=float, default=600.0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.solution is None:
        args.solution = args.out.parent / "serve_latency_candidate.py"
        args.solution.write_text(HONEST)
    tok = secrets.token_urlsafe(24)
    env = {**os.environ, "SOLBENCH_SERVE_TOKEN": tok,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    sys.path.insert(0, str(ROOT / "src"))
    from solbench.serve.client import ServeClient
    from solbench.spec import load_problem, load_solution
    from solbench.suites import resolve_problem

    # the client's own first imports (torch, the loaders) are paid here, not in a timed arm
    load_solution(args.solution, load_problem(resolve_problem(args.problem)))

    runs: dict[str, list] = {"local": [], "cli+server": [], "client first": [], "client": []}
    proc, url = start_server(args, env)
    try:
        client = ServeClient(url, token=tok, client="bench", timeout_s=args.step_timeout)
        r = run_client(client, args)
        runs["client first"].append(r)
        say(f"client first: {r['wall_s']:.2f} s {r}")
        for i in range(args.reps):
            for arm, extra in (("local", []), ("cli+server", ["--server", url])):
                r = run_cli(args, env, extra)
                runs[arm].append(r)
                say(f"[{i}] {arm}: {r}")
        for i in range(args.warm):
            time.sleep(args.gap)
            r = run_client(client, args)
            runs["client"].append(r)
            say(f"client {i}: {r['wall_s']:.2f} s overhead {r['overhead_s']:.2f} s {r['status']}")
        status = client.status()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    import platform

    rows = []
    for arm, rs in runs.items():
        rows.append({"arm": arm, "n": len(rs), "wall_s": med([r.get("wall_s") for r in rs]),
                     "worker_start_s": med([r.get("worker_start_s") for r in rs]),
                     "build_s": med([r.get("build_s") for r in rs]),
                     "correctness_s": med([r.get("correctness_s") for r in rs]),
                     "timing_s": med([r.get("timing_s") for r in rs]),
                     "overhead_s": med([r.get("overhead_s") for r in rs]),
                     "statuses": sorted({s for r in rs for s in (r.get("status") or ["error"])})})
    meta = {"device": args.device, "problem": args.problem, "workloads": args.workloads,
            "host": platform.node(), "cpus": os.cpu_count(), "load": os.getloadavg(),
            "command": " ".join([sys.executable, *sys.argv]), "server_status": status,
            "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows, "runs": runs}, indent=1))
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    lines = [f"# solbench serve latency: {args.problem} -w {args.workloads} on {args.device}", "",
             f"`{meta['command']}` ({meta['when']}, {meta['cpus']} CPUs, load {meta['load'][0]:.1f})", "",
             "| arm | n | wall s (median) | worker start | build | correctness | timing | wall - build - timing | statuses |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['arm']} | {r['n']} | {fmt(r['wall_s'])} | {fmt(r['worker_start_s'])} | "
                     f"{fmt(r['build_s'])} | {fmt(r['correctness_s'])} | {fmt(r['timing_s'])} | "
                     f"{fmt(r['overhead_s'])} | {' '.join(r['statuses'])} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    say("\n".join(lines))


if __name__ == "__main__":
    main()
