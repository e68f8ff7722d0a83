"""Check every hand-written Triton candidate against its problem's reference.

Usage (GPU):  PYTHONPATH=src python bench/triton_check.py --out $OUT/triton_check
       (CPU):  PYTHONPATH=src python bench/triton_check.py --out /tmp/tc --device cpu
               (Triton's interpreter, TRITON_INTERPRET=1, on the cpu-tagged workloads only)

For each candidate in ``solbench.suites.pack_triton.CANDIDATES`` and each workload of its
problem (the cpu-tagged ones and, on CUDA, the full-size ones): inputs from the problem's
custom entry point (seeded), the reference's outputs, the candidate's outputs (DPS
candidates get poison-filled output buffers: NaN for floats, -1 for ints), then per output
the upstream tolerance rule (|a-b| <= atol + rtol*|b| on >= required_matched_ratio of the
elements, fp32 compare, no NaN/Inf) plus the relative L2 error ||a-b|| / ||b||. On CUDA a
rough timing follows: median of N calls of reference and candidate with CUDA events, the L2
flushed (256 MB memset) before each call; this is a sanity figure, not the harness's
measurement. Each (candidate, workload) pair runs in its own try/except. A deadline keeps
the whole run under --budget-s seconds (default 210); pairs left out are listed as SKIPPED.

Writes ``<out>/triton_check.json`` (rows) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    ap.add_argument("--only", default="", help="comma-separated substrings of problem names")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per side (CUDA)")
    ap.add_argument("--budget-s", type=float, default=210.0)
    ap.add_argument("--seed", type=int, default=1234)
    return ap.parse_args(argv)


def upstream_check(a, b, tol: dict) -> dict:
    """The upstream tolerance rule (formats.md) on one output pair, plus relative L2."""
    import torch

    if tuple(a.shape) != tuple(b.shape):
        return {"ok": False, "why": f"shape {tuple(a.shape)} != {tuple(b.shape)}"}
    if a.dtype != b.dtype:
        return {"ok": False, "why": f"dtype {a.dtype} != {b.dtype}"}
    af, bf = a.detach().double(), b.detach().double()
    if not torch.isfinite(af).all():
        return {"ok": False, "why": "NaN/Inf (or unwritten poison) in candidate output"}
    diff = (af - bf).abs()
    atol, rtol = tol.get("max_atol", 1e-2), tol.get("max_rtol", 1e-2)
    ratio_needed = tol.get("required_matched_ratio", tol.get("required_match_ratio", 0.99))
    n = max(diff.numel(), 1)
    matched = float((diff <= atol + rtol * bf.abs()).sum()) / n
    ref_norm = float(bf.norm())
    rel_l2 = float(diff.norm()) / ref_norm if ref_norm > 0 else float(diff.norm())
    ok = matched >= ratio_needed
    return {"ok": ok, "why": "" if ok else f"matched {matched:.5f} < {ratio_needed}",
            "max_abs": float(diff.max()) if diff.numel() else 0.0, "rel_l2": rel_l2,
            "matched": matched}


def _poison(shape, dtype, device):
    import torch

    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, -1, dtype=dtype, device=device)


def _time_ms(fn, args, iters, device):
    import torch

    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=device)
    times = []
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    for _ in range(iters):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main(argv=None) -> int:
    args = _args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(ROOT / "src"))
    from solbench.spec import load_problem, load_solution
    from solbench.spec.reference import import_source
    from solbench.suites.pack_triton import CANDIDATES, solution_path

    args.out.mkdir(parents=True, exist_ok=True)
    data = ROOT / "src" / "solbench" / "suites" / "data"
    only = [s for s in args.only.split(",") if s]
    t_start = time.time()
    rows = []
    for suite, problem_name, _src, _dps in CANDIDATES:
        if only and not any(s in problem_name for s in only):
            continue
        try:
            problem = load_problem(data / suite / problem_name)
            sol = load_solution(solution_path(suite, problem_name), problem)
            mod = import_source(sol.source(sol.spec.entry_file),
                                stem=f"cand_{problem_name}")
            fn = getattr(mod, sol.spec.entry_symbol)
            ref_mod = problem.reference_module()
            entry = getattr(ref_mod, problem.definition.custom_inputs_entrypoint)
            ref = problem.make_reference(device)
        except Exception as e:  # noqa: BLE001 - report and go on
            rows.append({"suite": suite, "problem": problem_name, "workload": "-",
                         "status": "LOAD_ERROR", "detail": f"{type(e).__name__}: {e}"})
            continue
        defn = problem.definition
        for w in problem.workloads:
            is_cpu = "cpu" in (w.tags or [])
            if device == "cpu" and not is_cpu:
                continue
            row = {"suite": suite, "problem": problem_name, "workload": w.uuid[:8],
                   "cpu": is_cpu, "axes": w.axes}
            if time.time() - t_start > args.budget_s:
                row.update(status="SKIPPED", detail="time budget spent")
                rows.append(row)
                continue
            try:
                env = defn.resolve_axes(w.axes)
                torch.manual_seed(args.seed)
                if device != "cpu":
                    torch.cuda.manual_seed_all(args.seed)
                inputs = entry(dict(env), torch.device(device))
                call_args = [inputs[k] for k in defn.inputs]
                ref_out = ref(*call_args)
                ref_out = list(ref_out) if isinstance(ref_out, (tuple, list)) else [ref_out]
                if sol.spec.destination_passing_style:
                    outs = [_poison(defn.shape_of(s, env), ref_out[i].dtype, device)
                            for i, s in enumerate(defn.outputs.values())]
                    fn(*call_args, *outs)
                    cand_call = lambda *a, _o=outs: fn(*a, *_o)  # noqa: E731
                else:
                    outs = fn(*call_args)
                    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
                    cand_call = fn
                if device != "cpu":
                    torch.cuda.synchronize()
                tol = (w.tolerance.model_dump() if w.tolerance else {})
                checks = [upstream_check(o, r, tol) for o, r in zip(outs, ref_out)]
                if len(outs) != len(ref_out):
                    checks.append({"ok": False, "why": f"{len(outs)} outputs, "
                                                       f"expected {len(ref_out)}"})
                ok = all(c["ok"] for c in checks)
                row.update(
                    status="PASSED" if ok else "INCORRECT",
                    detail="; ".join(c["why"] for c in checks if c.get("why")),
                    max_abs=max((c.get("max_abs", math.inf) for c in checks), default=0.0),
                    rel_l2=max((c.get("rel_l2", math.inf) for c in checks), default=0.0),
                )
                if device != "cpu" and ok:
                    row["ref_ms"] = _time_ms(ref, call_args, args.iters, device)
                    row["cand_ms"] = _time_ms(cand_call, call_args, args.iters, device)
                    row["speedup"] = row["ref_ms"] / row["cand_ms"]
            except Exception as e:  # noqa: BLE001 - one failure must not lose the rest
                row.update(status="RUNTIME_ERROR", detail=f"{type(e).__name__}: {e}",
                           trace=traceback.format_exc(limit=3)[-1500:])
            rows.append(row)
            if device != "cpu":
                torch.cuda.empty_cache()

    env_info = {"device": torch.cuda.get_device_name() if device != "cpu" else "cpu",
                "torch": torch.__version__, "wall_s": round(time.time() - t_start, 1)}
    try:
        import triton

        env_info["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        env_info["triton"] = None
    (args.out / "triton_check.json").write_text(
        json.dumps({"environment": env_info, "rows": rows}, indent=1, default=str))
    _print_table(rows, env_info)
    bad = [r for r in rows if r["status"] not in ("PASSED", "SKIPPED")]
    return 1 if bad else 0


def _print_table(rows, env_info):
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        for r in rows:
            print(r)
        return
    t = Table(title=f"Triton candidates vs reference ({env_info['device']})")
    for c in ("problem", "workload", "status", "max_abs", "rel_l2", "ref_ms", "cand_ms",
              "speedup", "detail"):
        t.add_column(c, overflow="fold")

    def f(v, spec):
        return format(v, spec) if isinstance(v, (int, float)) else ""

    for r in rows:
        t.add_row(r["problem"], r["workload"] + (" cpu" if r.get("cpu") else ""), r["status"],
                  f(r.get("max_abs"), ".2e"), f(r.get("rel_l2"), ".2e"),
                  f(r.get("ref_ms"), ".4f"), f(r.get("cand_ms"), ".4f"),
                  f(r.get("speedup"), ".2f"), (r.get("detail") or "")[:80])
    Console(width=200).print(t)
    passed = sum(r["status"] == "PASSED" for r in rows)
    sp = [r["speedup"] for r in rows if "speedup" in r]
    line = f"{passed}/{len(rows)} pairs PASSED"
    if sp:
        geo = math.exp(sum(math.log(s) for s in sp) / len(sp))
        line += (f"; speedup over eager: median {statistics.median(sp):.2f}x, "
                 f"geomean {geo:.2f}x, wins {sum(s > 1 for s in sp)}/{len(sp)}")
    print(line)


if __name__ == "__main__":
    sys.exit(main())
