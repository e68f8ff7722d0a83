"""Agreement of solbench's B200 T_SOL with SOL-ExecBench's official sol_ms (CPU only).

For every workload of the dev problems (../shared/datasets/sol-execbench-dev), count the
reference's work once, then price it with model="solar" and model="refined" on the
B200_SOLAR spec (SOLAR's 1.5 GHz-lock constants, so the two models differ only in their
conventions), and compare with metadata.json's sol.per_workload[i].sol_ms.

Writes bench/results/sol_agreement.json (per-workload rows + summaries) and
bench/results/sol_agreement.md (tables, outliers with reasons).

    python bench/sol_agreement.py [--data DIR] [--out bench/results] [--jobs 2] [--only SUBSTR]
        [--time-limit S] [--merge]

--merge (with --only): recount only those problems and replace their rows in the existing
sol_agreement.json (e.g. problems whose counting hit the time limit on a loaded machine).
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


def _set_time_limit(s: int) -> None:
    global TIME_LIMIT_S
    TIME_LIMIT_S = s


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
            if c.solar_graph is not None:
                row["graph_macs"] = c.solar_graph.macs()
                row["graph_elems"] = c.solar_graph.fused_elements()
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
    ap.add_argument("--only", default=None, help="only problems whose path contains one of these (comma-separated)")
    ap.add_argument("--shard-out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("dirs", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--render-only", action="store_true", help="re-render the .md from the .json")
    ap.add_argument("--time-limit", type=int, default=TIME_LIMIT_S, help="per-workload counting budget (s)")
    ap.add_argument("--merge", action="store_true", help="with --only: replace those problems' rows "
                    "in the existing sol_agreement.json")
    args = ap.parse_args(argv)
    _set_time_limit(args.time_limit)
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
        pdirs = [p for p in pdirs if any(o in p for o in args.only.split(","))]
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
        procs.append((subprocess.Popen([sys.executable, __file__, "--shard-out", str(f),
                                        "--time-limit", str(args.time_limit), *shard]), f, shard))
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
    merged_note = None
    if args.merge:
        prev = json.loads((args.out / "sol_agreement.json").read_text())
        redone = {r["problem"] for r in rows}
        rows = sorted([r for r in prev["rows"] if r["problem"] not in redone] + rows,
                      key=lambda r: (r["subset"], r["problem"], r["index"]))
        merged_note = (f"{len(redone)} problem(s) recounted with --time-limit {args.time_limit} and merged: "
                       + ", ".join(sorted(redone)))
        t0 -= prev.get("elapsed_s", 0)
    result = {
        "hardware": "B200_SOLAR", "data": str(args.data), "workloads": len(rows),
        "errors": sum("error" in r for r in rows), "elapsed_s": round(time.time() - t0, 1),
        "summary": {m: summarize(rows, m) for m in ("solar", "refined")},
        "by_problem": {m: by_problem(rows, m) for m in ("solar", "refined")},
        "rows": rows,
    }
    if merged_note:
        result["merged"] = merged_note
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


#: why a problem's solar-mode ratio is off, per problem with a workload outside 0.8-1.25. Each was
#: checked by hand against the rows of this bench (the numbers quoted are from it) and the
#: reference; docs/sol-model.md gives the solar-mode conventions these rows depart from.
REASONS = {
    "081_joint_attention_context_projection": "official MACs are half the traced ones on every row: "
        "it counts the projection with K = inner_dim (2432), the reference multiplies cat([c, c], -1) "
        "(K = 4864) by W^T; official = 2*L*2432*2432/1.811 PF + 0.4 us to 0.1% on 15 of 16 rows (upstream's "
        "own deviation check lists this as 'reference skipped work ... full-K projection')",
    "061_tanh_gated_residual_add_backward": "official (unrounded, no 0.4 us floor) = distinct I/O: "
        "grad_output and hidden_states read once, two outputs written, 8 B per element of [B,S,4096] "
        "(4x1024x4096: 0.01750606 ms exactly); the layer walk reads grad_output in two layers (clone, .to) "
        "and adds the floor: 5/4 of the bytes",
    "075_sam_hq_mask_decoder_two_way_transformer": "official = 10.97-11.16 keys-sized tensors "
        "(B*P*n_key*256 elements) at 2 B + 0.4 us on every row; the traced layer walk reads/writes 6.0 "
        "(keys + key_pe twice, keys once, keys out): the official figure is a multi-kernel decomposition "
        "that writes and re-reads image-token intermediates, not the traced graph",
    "073_fused_encoder_final_norm_to_decoder_cross_attention_kv_projection": "official = 4.2-4.4 N "
        "elements (N = B*S*1024) at 2 B + 0.4 us on 15 of 16 rows, i.e. RMSNorm reads x and writes "
        "normalized (2N), each of the K and V projections reads normalized again (2N), outputs 0.25N: a "
        "three-kernel decomposition; the traced walk fuses it (1.25N). The same norm-then-consume "
        "structure in L1/033 and L1/069 is official-fused (they match)",
    "045_fused_linear_gelu_grn_linear": "official = 2.5 x B*H*W*512 elements at 2 B + 0.4 us (2.50-2.51 "
        "on the rows above 2 us, 2.39-2.87 on the rounded small ones): the 512-wide GELU output written "
        "once and read back around GRN's global (H, W) norm, plus input and output (a two-kernel "
        "decomposition); the traced walk counts 0.5x. Not the TF32 rate either (MACs/0.906 PF gives "
        "0.87-0.95x)",
    "017_fp8_shared_expert_mlp": "official rows belong to other token counts: each equals the fp8 MAC "
        "time of a different multiple of 128 tokens (row 0, 1280 tokens: official 0.0685 ms = 2816 "
        "tokens; row 10, 128 tokens: 0.0622 ms = 2560 tokens), so the official column is not monotonic "
        "in num_tokens; ours follows the workload axes (the 3 rows inside are coincidences)",
    "020_moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": "rows 4, 8, 9 (901-14107 "
        "tokens): official = every local expert on every token (T*32*(4096*7168+7168*2048) MACs at the "
        "16-bit rate: 21.95 ms for 14107 tokens), the reference routes each token to 8 of 256 experts; "
        "rows 1, 12, 14, 18: the routing blobs are absent and synthesised, and with them no token reaches "
        "a local expert, so the dequantised expert weights are never read again and count as written "
        "(2x); the other 12 rows match to 0.1%",
    "021_fp8_mamba2_in_projection": "M <= 384 rows: the official reads the bf16 weight at its own 2 B "
        "(M=128: 75.0 MB weight + activations = 10.06 us), solar prices the fp8 problem at 1 B per "
        "element; the 13 compute-bound rows match to 0.1%",
    "001_fp8_attention_output_projection": "the one memory-bound row (1x256 tokens): the official reads "
        "the bf16 weight at 2 B per element (0.01616 ms), solar prices the fp8 problem at 1 B; the other "
        "15 rows are within 0.99-1.00",
    "013_fp8_mla_kv_compression_projection": "the one memory-bound small row (1x256 tokens): official "
        "above the 1-byte pricing, as in Quant/001 and 021 (bf16 weights read at 2 B); 15 rows match",
    "005_fp8_moe_router_projection": "smallest row (M=256, official 0.24 us): the official is linear in M "
        "(0.1197 us + 0.467 ns*M), its constant = the 458,752-element router weight at 2 B; solar prices "
        "it at 1 B (0.76x); the other 15 rows are within 0.89-1.01",
    "025_nvfp4_attention_qkv_projection": "<= 256-token rows: the official nvfp4 figures are exactly "
        "linear in the token count (256 tokens = 1/16 of 4096 tokens' 0.01718019 ms), with no weight-read "
        "or floor term, so they fall below the packed-weight read solar prices; the other rows 0.87-1.08",
    "029_nvfp4_fused_mlp_silu_gating": "128-token row: the official is exactly linear in tokens "
        "(0.02324881 ms per 1024), no weight-read term; solar is bound by reading the packed weights "
        "(2.2x); the other rows 0.92-1.24",
}


def _f(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"


def render_md(res: dict) -> str:
    out = ["# SOL agreement with the official SOL-ExecBench B200 sol_ms", "",
           f"Workloads: {res['workloads']}, counting errors: {res['errors']}, "
           f"hardware spec: {res['hardware']}, {res['elapsed_s']} s on CPU."
           + (f" {res['merged']}." if res.get("merged") else ""), "",
           "| model | n | median ours/official | p10 | p90 | share within 0.8-1.25 | geomean |",
           "|---|---|---|---|---|---|---|"]
    for m in ("solar", "refined"):
        s = res["summary"][m]
        if s.get("n"):
            out.append(f"| {m} | {s['n']} | {_f(s['median'])} | {_f(s['p10'])} | {_f(s['p90'])} | "
                       f"{s['within_0.8_1.25']:.1%} | {_f(s['geomean'])} |")
    out += ["", "Solar mode follows upstream SOLAR's conventions (docs/sol-model.md): bytes = the traced layer "
            "walk of the first SOLAR analyzer at one width (2 B; 1 B / 0.5 B when the source names fp8 / fp4), "
            "MACs of the traced einsum layers, + 0.4 us except on quantised problems. Refined mode is ours.",
            "", "## Outliers (solar mode: problems with a workload outside 0.8-1.25)", "",
            "| problem | rows out | median | min | max | reason (checked) |", "|---|---|---|---|---|---|"]
    for p in res["by_problem"]["solar"]:
        if p["median"] is None or p["min"] < 0.8 or p["max"] > 1.25:
            n_out = sum(1 for r in res["rows"] if r["problem"] == p["problem"] and "solar" in r
                        and r.get("official_ms") and not 0.8 <= r["solar"]["sol_ms"] / r["official_ms"] <= 1.25)
            reason = REASONS.get(p["problem"], "not analysed")
            out.append(f"| {p['problem']} | {n_out}/{p['n']} | {_f(p['median'])} | {_f(p['min'])} | "
                       f"{_f(p['max'])} | {reason} |")
    out += ["", "## Refined mode: the systematic shifts", "",
            "- x15.0 on fp32 problems bound by matmul (L1/037, L1/089, L2/019, L2/023, L2/063, L2/071, L2/079): "
            "refined prices fp32 matmul on CUDA cores (121 TF at the lock) unless the definition allows "
            "TF32; solar at the bf16 rate (1811 TF); 1811/121 = 15.0.",
            "- x30 on fp8 problems whose reference emulates the fp8 GEMM in fp32 (Quant/001, 013, 021): refined "
            "prices the fp32 matmul it sees on CUDA cores (3620/121 = 29.9). Known limitation: operand "
            "provenance (fp8 values up-cast to fp32) is not tracked, so these bounds are valid but loose.",
            "- x2 on fp32 memory-bound problems the official prices at 2 B (L1/085): refined sizes fp32 at 4 B.",
            "- below 1 on tiny workloads (FlashInfer 024, 004): refined adds no 0.4 us constant.",
            "- about x0.5 on causal attention (FlashInfer 016): refined counts only unmasked query-key pairs.",
            "- below 1 where inputs are only gathered (paged KV, embeddings): refined reads the gathered rows.",
            "- x1.4 on L1/033 and L1/093, x2.3 on L1/013: refined reads every input once; the official layer walk "
            "skips an input that enters a layer next to an intermediate (residual, weights, saved tensors)."]
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
