"""Agreement of solbench's B200 T_SOL with SOL-ExecBench's official sol_ms (CPU only).

For every workload of the dev problems (../shared/datasets/sol-execbench-dev), count the
reference's work once, then price it with model="solar" and model="refined" on the
B200_SOLAR spec (SOLAR's 1.5 GHz-lock constants, so the two models differ only in their
conventions), and compare with metadata.json's sol.per_workload[i].sol_ms.

Writes bench/results/sol_agreement.json (per-workload rows + summaries) and
bench/results/sol_agreement.md (tables, outliers with reasons).

    python bench/sol_agreement.py [--data DIR] [--out bench/results] [--jobs 2] [--only SUBSTR]
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev"


#: per-workload counting budget (s): a reference that loops in Python over a large real
#: workload is reported as an error rather than stalling the bench
TIME_LIMIT_S = 60


class CountTimeout(BaseException):  # not Exception: must not be caught as a failed fake run
    pass


def _timeout(signum, frame):
    raise CountTimeout(f"counting took more than {TIME_LIMIT_S} s")


def problem_rows(pdir: str) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    from solbench.sol import bound_from_counts, count_workload, load_hardware
    from solbench.spec import load_problem

    pdir = Path(pdir)
    meta = json.loads((pdir / "metadata.json").read_text())
    official = [w["sol_ms"] for w in meta["sol"]["per_workload"]]
    hw = load_hardware("B200_SOLAR")
    rows = []
    try:
        problem = load_problem(pdir)
    except Exception as e:  # noqa: BLE001 - report, never stop the bench
        return [{"problem": pdir.name, "subset": pdir.parent.name, "index": i, "official_ms": o,
                 "error": f"load: {type(e).__name__}: {e}"} for i, o in enumerate(official)]
    timeouts = 0
    for i, w in enumerate(problem.workloads):
        row = {"problem": pdir.name, "subset": pdir.parent.name, "index": i, "uuid": w.uuid,
               "axes": w.axes, "official_ms": official[i] if i < len(official) else None}
        if timeouts >= 2:
            row["error"] = "skipped: two earlier workloads of this problem hit the counting time limit"
            rows.append(row)
            continue
        t0 = time.perf_counter()
        signal.signal(signal.SIGALRM, _timeout)
        signal.alarm(TIME_LIMIT_S)
        try:
            c = count_workload(problem, w, max_real_bytes=2e9)
            signal.alarm(0)
            for model in ("solar", "refined"):
                b = bound_from_counts(c, hw, model, allow_tf32=bool(problem.definition.allow_tf32),
                                      workload_uuid=w.uuid, axes=w.axes)
                row[model] = {"sol_ms": b.sol_ms, "bottleneck": b.bottleneck, "terms_ms": b.terms_ms,
                              "bytes_model": b.bytes_model}
            row["solar_macs"] = b.solar_macs
            row["flops"] = b.flops
            row["bytes_fused"] = c.bytes_fused
            row["bytes_unfused"] = c.bytes_unfused
            row["unknown_ops"] = dict(c.unknown_ops)
            row["mode"] = c.mode
            row["synthesized"] = c.synthesized
            row["attention"] = [{k: a[k] for k in ("L", "S", "causal", "gqa")} for a in c.attention_calls[:1]]
        except CountTimeout as e:
            row["error"] = f"CountTimeout: {e}"
            timeouts += 1
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            signal.alarm(0)
        row["count_s"] = round(time.perf_counter() - t0, 3)
        rows.append(row)
    return rows


def summarize(rows: list[dict], model: str) -> dict:
    ratios = [r[model]["sol_ms"] / r["official_ms"] for r in rows
              if model in r and r.get("official_ms")]
    if not ratios:
        return {"n": 0}
    qs = statistics.quantiles(ratios, n=10) if len(ratios) >= 2 else [ratios[0]] * 9
    within = sum(0.8 <= x <= 1.25 for x in ratios) / len(ratios)
    return {"n": len(ratios), "median": statistics.median(ratios), "p10": qs[0], "p90": qs[-1],
            "within_0.8_1.25": within,
            "geomean": math.exp(sum(math.log(x) for x in ratios) / len(ratios))}


def by_problem(rows, model):
    out = {}
    for r in rows:
        out.setdefault((r["subset"], r["problem"]), []).append(r)
    res = []
    for (sub, prob), rs in sorted(out.items()):
        rat = [r[model]["sol_ms"] / r["official_ms"] for r in rs if model in r and r.get("official_ms")]
        errs = [r["error"] for r in rs if "error" in r]
        res.append({"subset": sub, "problem": prob, "n": len(rs), "counted": len(rat),
                    "median": statistics.median(rat) if rat else None,
                    "min": min(rat) if rat else None, "max": max(rat) if rat else None,
                    "bottlenecks": sorted({r[model]["bottleneck"] for r in rs if model in r}),
                    "modes": sorted({r.get("mode", "-") for r in rs}),
                    "unknown_ops": sorted({k for r in rs for k in r.get("unknown_ops", {})}),
                    "error": errs[0] if errs else None})
    return res


t0_global = time.time()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="only problems whose name contains this")
    ap.add_argument("--shard-out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("dirs", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.shard_out:  # worker: count the given problem dirs, append rows as JSON lines
        for d in args.dirs:
            t1 = time.time()
            got = problem_rows(d)
            with open(args.shard_out, "a") as fh:
                for r in got:
                    fh.write(json.dumps(r, allow_nan=False) + "\n")
            print(f"[{time.time() - t0_global:6.0f}s] {Path(d).name}: {len(got)} workloads, "
                  f"{sum('error' in r for r in got)} errors ({time.time() - t1:.0f} s)", flush=True)
        return 0
    if not args.data.exists():
        print(f"dataset not found: {args.data}", file=sys.stderr)
        return 2
    pdirs = sorted(str(p.parent) for p in args.data.glob("*/*/metadata.json"))
    if args.only:
        pdirs = [p for p in pdirs if args.only in p]
    t0 = time.time()
    rows: list[dict] = []
    # one process per shard (no executor: a worker killed by the OOM killer must not hang the
    # bench); each shard runs problems in order and writes JSON lines to a temp file
    import subprocess
    import tempfile

    tmpdir = Path(tempfile.mkdtemp(prefix="sol_agreement_"))
    shards = [pdirs[i::args.jobs] for i in range(args.jobs)]
    procs = []
    for i, shard in enumerate(shards):
        f = tmpdir / f"shard{i}.jsonl"
        procs.append((subprocess.Popen([sys.executable, __file__, "--shard-out", str(f), *shard]), f, shard))
    for proc, f, shard in procs:
        proc.wait()
    done = set()
    for proc, f, shard in procs:
        if f.exists():
            for line in f.read_text().splitlines():
                r = json.loads(line)
                rows.append(r)
                done.add(r["problem"])
        for p in shard:
            if Path(p).name not in done:
                rows.append({"problem": Path(p).name, "subset": Path(p).parent.name, "index": -1,
                             "official_ms": None, "error": f"shard process exited {proc.returncode}"})
    rows.sort(key=lambda r: (r["subset"], r["problem"], r["index"]))
    result = {
        "hardware": "B200_SOLAR", "data": str(args.data), "workloads": len(rows),
        "errors": sum("error" in r for r in rows), "elapsed_s": round(time.time() - t0, 1),
        "summary": {m: summarize(rows, m) for m in ("solar", "refined")},
        "by_problem": {m: by_problem(rows, m) for m in ("solar", "refined")},
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sol_agreement.json").write_text(json.dumps(result, indent=1, allow_nan=False))
    (args.out / "sol_agreement.md").write_text(render_md(result))
    for m in ("solar", "refined"):
        s = result["summary"][m]
        if s.get("n"):
            print(f"{m:8s} n={s['n']} median={s['median']:.3f} p10={s['p10']:.3f} p90={s['p90']:.3f} "
                  f"within0.8-1.25={s['within_0.8_1.25']:.1%}")
    print(f"errors: {result['errors']} of {len(rows)}; {result['elapsed_s']} s")
    return 0


def _f(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"


def render_md(res: dict) -> str:
    out = ["# SOL agreement with the official SOL-ExecBench B200 sol_ms", "",
           f"Workloads: {res['workloads']}, counting errors: {res['errors']}, "
           f"hardware spec: {res['hardware']}, {res['elapsed_s']} s on CPU.", "",
           "| model | n | median ours/official | p10 | p90 | share within 0.8-1.25 | geomean |",
           "|---|---|---|---|---|---|---|"]
    for m in ("solar", "refined"):
        s = res["summary"][m]
        if s.get("n"):
            out.append(f"| {m} | {s['n']} | {_f(s['median'])} | {_f(s['p10'])} | {_f(s['p90'])} | "
                       f"{s['within_0.8_1.25']:.1%} | {_f(s['geomean'])} |")
    for m in ("solar", "refined"):
        out += ["", f"## Per problem, model={m}", "",
                "| subset | problem | n | median | min | max | bottleneck | counting | unknown ops | error |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for p in res["by_problem"][m]:
            out.append(f"| {p['subset']} | {p['problem']} | {p['counted']}/{p['n']} | {_f(p['median'])} | "
                       f"{_f(p['min'])} | {_f(p['max'])} | {','.join(p['bottlenecks'])} | "
                       f"{','.join(p['modes'])} | {' '.join(p['unknown_ops'])[:60]} | "
                       f"{(p['error'] or '')[:80]} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
