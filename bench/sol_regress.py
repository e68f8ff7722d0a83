"""Do two versions of the SOL code give the same bounds? Save every dev workload's bounds, then
compare a later run with them.

For each workload of the dev problems it records both models' bound on two specs (refined on
H200, solar on B200, which uses B200_SOLAR) with every term the bound is built from: T_SOL,
per-resource terms, FLOPs by class, fused / model / certain bytes, solar MACs, counting mode.

    python bench/sol_regress.py --save bench/results/sol_bounds_before.json [--jobs 2]
    python bench/sol_regress.py --compare bench/results/sol_bounds_before.json [--jobs 2]
        [--save-new NEW.json] [--report REPORT.json] [--against NEW.json: no counting]

``--compare`` counts again with the code on PYTHONPATH (or ``src/`` of this checkout) and
reports, over every numeric field of every workload, the largest relative difference
|new - old| / max(|old|, tiny), which workload and field it is, the same per model/spec (so a
solar-mode change shows that no refined field moved), and workloads missing from either side; exit status 1 when it exceeds ``--tol`` (default 1e-9: float noise of sums taken
in another order).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev"
SPECS = (("refined", "H200"), ("solar", "B200"))


def _init():
    import torch

    torch.set_num_threads(1)


def _fields(b) -> dict:
    return {"sol_ms": b.sol_ms, "terms_ms": b.terms_ms, "flops": b.flops, "bytes_fused": b.bytes_fused,
            "bytes_unfused": b.bytes_unfused, "bytes_model": b.bytes_model, "solar_macs": b.solar_macs,
            "t_certain_ms": b.t_certain_ms, "overhead_ms": b.overhead_ms,
            "tensor_terms_ms": b.tensor_terms_ms, "bottleneck": b.bottleneck,
            "unknown_ops": b.unknown_ops}


def problem_bounds(pdir: str) -> dict:
    """``{workload uuid: {"mode", "refined/H200": fields, "solar/B200": fields}}`` (or
    ``{"error": ...}`` for a workload that could not be counted) of one problem directory."""
    from solbench.sol import bound_from_counts, load_hardware
    from solbench.sol.counting import CountingError
    from solbench.spec import load_problem

    p = load_problem(pdir)
    try:
        from solbench.sol.batch import problem_counts
    except ImportError:  # the code before per-problem batching: one count per workload
        from solbench.sol.counting import count_workload

        def problem_counts(problem, workloads):
            out = []
            for w in workloads:
                try:
                    out.append(count_workload(problem, w))
                except CountingError as e:
                    out.append(e)
            return out
    allow_tf32 = bool(getattr(p.definition, "allow_tf32", False))
    out = {}
    for w, c in zip(p.workloads, problem_counts(p, p.workloads)):
        if isinstance(c, Exception):
            out[w.uuid] = {"error": str(c)}
            continue
        row = {"mode": c.mode}
        for model, hw in SPECS:
            row[f"{model}/{hw}"] = _fields(bound_from_counts(c, load_hardware(hw), model, allow_tf32=allow_tf32))
        out[w.uuid] = row
    return out


def _one(pdir: str) -> tuple[str, dict, float]:
    t0 = time.process_time()
    try:
        res = problem_bounds(pdir)
    except Exception as e:  # noqa: BLE001 - reported as the problem's error
        res = {"__error__": f"{type(e).__name__}: {e}"}
    return Path(pdir).relative_to(Path(pdir).parents[1]).as_posix(), res, time.process_time() - t0


def collect(data: Path, jobs: int, only: str | None = None) -> dict:
    pdirs = sorted(str(p.parent) for p in data.glob("*/*/definition.json"))
    if only:
        pdirs = [p for p in pdirs if any(o in p for o in only.split(","))]
    pdirs.sort(key=lambda d: -sum(1 for _ in open(Path(d) / "workload.jsonl")))
    out = {}
    with mp.get_context("spawn").Pool(jobs, initializer=_init) as pool:
        for name, res, cpu in pool.imap_unordered(_one, pdirs):
            out[name] = res
            print(f"{name}: {len(res)} workloads, {cpu:.1f} s CPU", flush=True)
    return dict(sorted(out.items()))


def _numbers(x, prefix=""):
    if isinstance(x, bool) or x is None:
        return
    if isinstance(x, (int, float)):
        yield prefix, float(x)
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _numbers(v, f"{prefix}.{k}" if prefix else str(k))


def compare(old: dict, new: dict) -> dict:
    """Largest relative difference over every numeric field of every workload of ``old``
    and ``new`` (:func:`collect` results), plus keys and non-numeric fields that differ."""
    worst = (0.0, None)
    n = 0
    mismatches = []
    per_problem: dict[str, float] = {}
    #: model/spec ("refined/H200", "solar/B200") -> largest relative difference of its fields
    per_model: dict[str, float] = {}
    for prob in sorted(set(old) | set(new)):
        o, w = old.get(prob, {}), new.get(prob, {})
        for uuid in sorted(set(o) | set(w)):
            a, b = o.get(uuid), w.get(uuid)
            if a is None or b is None:
                mismatches.append(f"{prob} {uuid}: only in {'new' if a is None else 'old'}")
                continue
            n += 1
            fa, fb = dict(_numbers(a)), dict(_numbers(b))
            for k in sorted(set(fa) | set(fb)):
                if k not in fa or k not in fb:
                    mismatches.append(f"{prob} {uuid} {k}: only in {'new' if k not in fa else 'old'}")
                    continue
                d = abs(fb[k] - fa[k]) / max(abs(fa[k]), 1e-300) if fa[k] != fb[k] else 0.0
                per_problem[prob] = max(per_problem.get(prob, 0.0), d)
                model_hw = k.split(".", 1)[0]
                if "/" in model_hw:
                    per_model[model_hw] = max(per_model.get(model_hw, 0.0), d)
                if d > worst[0]:
                    worst = (d, f"{prob} {uuid} {k}: {fa[k]!r} -> {fb[k]!r}")
            for model_hw in (k for k in a if "/" in k):
                if a[model_hw].get("bottleneck") != b.get(model_hw, {}).get("bottleneck"):
                    mismatches.append(f"{prob} {uuid} {model_hw}.bottleneck: "
                                      f"{a[model_hw].get('bottleneck')} -> {b.get(model_hw, {}).get('bottleneck')}")
            if a.get("error") != b.get("error") and (a.get("error") or b.get("error")):
                mismatches.append(f"{prob} {uuid} error: {a.get('error')!r} -> {b.get('error')!r}")
    return {"workloads": n, "max_rel_diff": worst[0], "where": worst[1], "mismatches": mismatches,
            "per_model": dict(sorted(per_model.items())),
            "per_problem": dict(sorted(per_problem.items(), key=lambda kv: -kv[1]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--compare", type=Path)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated substrings of problem paths")
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--save-new", type=Path, default=None, help="with --compare: also save the new bounds")
    ap.add_argument("--against", type=Path, default=None, help="with --compare: the new bounds from this "
                    "file (a --save-new of an earlier run) instead of counting again")
    ap.add_argument("--report", type=Path, default=None, help="with --compare: write the comparison as JSON")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.against is not None:
        got = json.loads(args.against.read_text())
        if args.only:
            got = {k: v for k, v in got.items() if any(o in k for o in args.only.split(","))}
    else:
        got = collect(args.data, args.jobs, args.only)
    print(f"counted {sum(len(v) for v in got.values())} workloads of {len(got)} problems in "
          f"{time.perf_counter() - t0:.1f} s")
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(got, indent=0, sort_keys=True))
        return 0
    old = json.loads(args.compare.read_text())
    if args.only:
        old = {k: v for k, v in old.items() if k in got}
    res = compare(old, got)
    print(f"{res['workloads']} workloads compared; max relative difference {res['max_rel_diff']:.3g}"
          + (f" ({res['where']})" if res["where"] else ""))
    for model_hw, d in res["per_model"].items():
        print(f"  {model_hw}: max relative difference {d:.3g} over every field of this model")
    for prob, d in list(res["per_problem"].items())[:5]:
        print(f"  {prob}: max relative difference {d:.3g}")
    if args.save_new:
        args.save_new.write_text(json.dumps(got, indent=0, sort_keys=True))
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps({"old": str(args.compare), "new": str(args.against or "counted"),
                                           "only": args.only, "tol": args.tol, **res}, indent=1))
    for m in res["mismatches"][:20]:
        print("  mismatch:", m)
    return 0 if res["max_rel_diff"] <= args.tol and not res["mismatches"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
