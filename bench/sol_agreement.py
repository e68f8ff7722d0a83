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
#: address-space cap of each shard process (GiB)
SHARD_MEMORY_GB = 7


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
    ap.add_argument("--render-only", action="store_true", help="re-render the .md from the .json")
    args = ap.parse_args(argv)
    if args.render_only:
        res = json.loads((args.out / "sol_agreement.json").read_text())
        (args.out / "sol_agreement.md").write_text(render_md(res))
        return 0
    if args.shard_out:  # worker: count the given problem dirs, append rows as JSON lines
        # cap the address space so a reference that needs more memory on the real CPU path
        # fails with an allocation error (recorded) instead of drawing the OOM killer
        import resource

        cap = int(SHARD_MEMORY_GB * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
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


#: why a problem's solar-mode ratio is off, from reading its reference and rows (checked by
#: hand; see docs/sol-model.md)
REASONS = {
    "013_fused_residual_rms_norm_backward": "fp32 saved tensors: ours prices every input and output "
        "(x, normalized fp32 + grad_output, 2 bf16 outputs); the official figure matches ~40% of those "
        "elements, i.e. upstream's traced graph drops inputs it sees only through in-place/aliased outputs",
    "045_fused_linear_gelu_grn_linear": "fp32 problem priced at the TF32 rate upstream (official - 0.4 us "
        "= MACs/0.906 PF) while other fp32 problems use the 16-bit rate (leaderboard fp32_as policy applied "
        "unevenly); ours uses the 16-bit rate for all",
    "031_flux_timestep_guidance_projection_embedding": "custom inputs build large weight tensors that the "
        "official figure does not count (it tracks the batch only); ours counts every input of run()",
    "093_grouped_topk_moe_routing_backward": "int64 index tensors and fp32 inputs all priced at 2 B by "
        "both; the official bytes are ~64% of ours (upstream counts only tensors its trace reaches)",
    "004_gemm_n128_k2048": "a few large-M workloads are official = compute + 0.4 us although the input "
        "alone needs more DRAM time: upstream's memory term is smaller there",
    "047_moe_training_token_repeat_and_expert_computation": "data-dependent (.item()); the real CPU "
        "fallback is refused for inputs over 2 GB in this bench",
}


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
    out += ["", "## Outliers (solar mode: problems with a workload outside 0.8-1.25)", "",
            "| problem | median | min | max | likely reason |", "|---|---|---|---|---|"]
    for p in res["by_problem"]["solar"]:
        if p["median"] is None or p["min"] < 0.8 or p["max"] > 1.25:
            reason = REASONS.get(p["problem"], "not analysed; median agrees, a few workloads off"
                                 if p["median"] and 0.95 < p["median"] < 1.05 else "not analysed")
            out.append(f"| {p['problem']} | {_f(p['median'])} | {_f(p['min'])} | {_f(p['max'])} | {reason} |")
    out += ["", "## Refined mode: the systematic shifts", "",
            "- x15.0 on fp32 problems bound by matmul (L1/037, L2/023, L2/063, L2/071, L2/079, L1/021): "
            "refined prices fp32 matmul on CUDA cores (121 TF at the lock) unless the definition allows "
            "TF32; solar at the bf16 rate (1811 TF); 1811/121 = 15.0.",
            "- x2 on fp32 memory-bound problems (L1/085, L1/025): refined sizes fp32 tensors at 4 B, solar at 2 B.",
            "- x30 on fp8 problems whose reference emulates the fp8 GEMM in fp32 (Quant/013, Quant/021, "
            "Quant/005): refined prices the fp32 matmul it sees on CUDA cores (3620/121 = 29.9). Known "
            "limitation: operand provenance (fp8 values up-cast to fp32) is not tracked, so these bounds "
            "are valid but loose.",
            "- below 1 on tiny workloads (FlashInfer 024, 004): refined adds no 0.4 us constant.",
            "- about x0.5 on causal attention (FlashInfer 016): refined counts only unmasked query-key pairs.",
            "- below 1 where inputs are only gathered (paged KV, embeddings): refined reads the gathered rows."]
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
