"""A/A distribution on a device: the reference evaluated as the candidate (solbench selftest's
A/A check, :func:`solbench.selftest.run_selftest` without the known difference and the
fresh-vs-reused rerun), over the problems of one or more bundled suites, for as long as a
time budget allows.

Problems are taken alternately from the suites (in an order shuffled with ``--order-seed``,
so a budget that ends early leaves a sample, not the alphabet's first letters), each with all
its workloads (``--limit N``: the N smallest). After each problem the rows are appended to
OUT/aa_rows.jsonl and OUT/aa_summary.json is rewritten: per suite the A/A speedup's
p5/p50/p95, how many read 1.0 within their noise interval, how many are conclusive (interval
within 2x), for all workloads and for those whose reference median is >= 20 us (the
timing-fidelity goal's floor) apart; so a run cut short keeps what it finished.

Usage (lead, one H100, about 210 s of work plus the start; the largest workload of each
problem, so that most rows are >= 20 us, problems of l1 and DLRM-Bench alternating until the
budget is spent; the summary says how many of the planned problems were done):
    python bench/aa_device.py --suite l1 --suite dlrm --largest 1 --budget-s 210 --out $OUT/aa
CPU plumbing check (workloads tagged cpu, a short budget):
    PYTHONPATH=src python bench/aa_device.py --suite l1 --suite dlrm --device cpu --cpu-tagged \
        --budget-s 60 --iters 10 --out /tmp/aa
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: reference median (ms) from which a workload counts in the ">= 20 us" distribution
LONG_MS = 0.02


def _dist(rows: list[dict]) -> dict:
    from solbench.selftest import quantile

    xs = [r["aa_speedup"] for r in rows if r["aa_speedup"] is not None]
    return {"n": len(rows), "n_passed": len(xs),
            "p5": quantile(xs, 0.05), "p50": quantile(xs, 0.5), "p95": quantile(xs, 0.95),
            "min": min(xs) if xs else None, "max": max(xs) if xs else None,
            "within_noise": sum(bool(r["aa_within_noise"]) for r in rows),
            "conclusive": sum(bool(r["aa_conclusive"]) for r in rows),
            "in_0.98_1.02": sum(0.98 <= x <= 1.02 for x in xs),
            # A/A pairs the paired-block rule resolved: each one a false claim (issue 31 goal 3)
            "resolved_claims": sum(r.get("aa_resolved") is True for r in rows),
            "not_passed": [f"{r['problem']}/{r['workload']}: {r['aa_status']}" for r in rows
                           if r["aa_status"] != "PASSED"][:20]}


def summarize(rows: list[dict]) -> dict:
    out = {}
    for suite in dict.fromkeys(r["suite"] for r in rows):
        rs = [r for r in rows if r["suite"] == suite]
        long_ = [r for r in rs if r["ref_ms"] is not None and r["ref_ms"] >= LONG_MS]
        short = [r for r in rs if r["ref_ms"] is not None and r["ref_ms"] < LONG_MS]
        out[suite] = {"all": _dist(rs), "ref_ge_20us": _dist(long_), "ref_lt_20us": _dist(short),
                      "problems": len({r["problem"] for r in rs})}
    return out


def plan(suites: list[str], seed: int) -> list[tuple[str, Path]]:
    """(suite, problem dir), alternating between the suites, each suite's order shuffled."""
    from solbench.suites import suite_problems

    per = []
    for s in suites:
        ps = list(suite_problems(s))
        random.Random(f"{seed}:{s}").shuffle(ps)
        per.append([(s, p) for p in ps])
    out = []
    for i in range(max(len(x) for x in per)):
        out += [x[i] for x in per if i < len(x)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", action="append", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=240.0, help="no problem is started after this")
    ap.add_argument("--iters", type=int, default=None, help="timed iterations (default 50 CUDA, 10 CPU)")
    ap.add_argument("--rounds", type=int, default=1, help="correctness rounds (timing is what is measured)")
    ap.add_argument("--limit", type=int, default=None, help="the N smallest workloads of each problem")
    ap.add_argument("--largest", type=int, default=None, help="the N largest workloads of each problem "
                    "(declared input + output bytes)")
    ap.add_argument("--cpu-tagged", action="store_true", help="only workloads tagged cpu")
    ap.add_argument("--order-seed", type=int, default=13)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)

    from solbench.cli.common import choose_workloads
    from solbench.harness import EvalConfig
    from solbench.selftest import run_selftest
    from solbench.spec import load_problem

    a.out.mkdir(parents=True, exist_ok=True)
    rows_path, sum_path = a.out / "aa_rows.jsonl", a.out / "aa_summary.json"
    rows_path.write_text("")
    cfg = EvalConfig(device=a.device, rounds=a.rounds, iters=a.iters)
    rows: list[dict] = []
    t0 = time.perf_counter()
    per_problem: list[float] = []
    done = 0
    todo = plan(a.suite, a.order_seed)
    for suite, pdir in todo:
        elapsed = time.perf_counter() - t0
        # do not start a problem that the budget cannot hold (the mean so far as the guess)
        guess = sum(per_problem) / len(per_problem) if per_problem else 0.0
        if elapsed + guess > a.budget_s:
            break
        prob = load_problem(pdir)
        pool = [w for w in prob.workloads if "cpu" in (w.tags or [])] if a.cpu_tagged else None
        if a.cpu_tagged and not pool:
            continue
        ws = choose_workloads(prob, None, a.limit, None, pool=pool)
        if a.largest:
            ws = sorted(ws, key=lambda w: -prob.workload_bytes(w))[:a.largest]
        tp = time.perf_counter()
        rep = run_selftest([(suite, prob, ws)], cfg, known_difference=False, agreement=False)
        dt = time.perf_counter() - tp
        per_problem.append(dt)
        done += 1
        new = [asdict(r) for r in rep.rows]
        for r in new:
            r["seconds_problem"] = dt
        rows += new
        with rows_path.open("a") as f:
            for r in new:
                f.write(json.dumps(r) + "\n")
        summary = {"device": a.device, "iters": cfg.n_iters(), "rounds": a.rounds,
                   "budget_s": a.budget_s, "elapsed_s": time.perf_counter() - t0,
                   "problems_done": done, "problems_planned": len(todo), "suites": summarize(rows)}
        sum_path.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"[{time.perf_counter() - t0:6.1f}s] {suite}/{prob.name}: {len(new)} workload(s) in {dt:.1f}s: "
              + ", ".join(f"{r['aa_speedup']:.3f}" if r["aa_speedup"] is not None else r["aa_status"]
                          for r in new), flush=True)
    s = summarize(rows)
    print("\n| suite | set | workloads | p5 | p50 | p95 | min-max | in 0.98-1.02 | within noise | conclusive "
          "| resolved (false claims) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def f(v):
        return "-" if v is None else f"{v:.3f}"

    for suite, d in s.items():
        for key in ("all", "ref_ge_20us", "ref_lt_20us"):
            x = d[key]
            print(f"| {suite} ({d['problems']} problems) | {key} | {x['n']} | {f(x['p5'])} | {f(x['p50'])} | "
                  f"{f(x['p95'])} | {f(x['min'])}-{f(x['max'])} | {x['in_0.98_1.02']} | {x['within_noise']} | "
                  f"{x['conclusive']} | {x['resolved_claims']} |")
            if x["not_passed"]:
                print(f"|  | not PASSED: {x['not_passed'][:5]} |")
    print(f"{done} of {len(todo)} problems in {time.perf_counter() - t0:.0f} s; wrote {rows_path}, {sum_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
