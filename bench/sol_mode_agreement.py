"""Differential check of the SOL count's real-tensor run against its shape-only runs.

A reference that reads no value counts on the meta device (or on FakeTensors): shapes and
dtypes only, nothing computed. The same reference counted on real CPU tensors (the run used for
references that do read values, with its short-circuited products, stand-ins, lazy fills and
lazy masks) must give the same bound to the last bit: the references' control flow reads no
value, so every difference is an artefact of the real run (a stand-in that lost an alias, a
skipped op that was not counted, ...). For every problem of the dataset whose first workloads
count without real tensors, this counts them again on real tensors
(``count_workload(meta=False, fake_failed=...)``) and compares every numeric field of
refined/H200 and solar/B200 (``bench/sol_regress.py``'s fields), except ``bytes_unfused``:
the bytes an unfused eager run moves are summed over the aten ops dispatched, and the CPU
kernels dispatch other ops than the meta kernels for the same call (a convolution, SDPA's math
path, a tanh GELU), so that informational figure is reported apart (``unfused_max_rel``) and is
no part of the bound.

    PYTHONPATH=src python bench/sol_mode_agreement.py [--data DIR] [--workloads 2] [--jobs 2]
        [--only NAME,...] [--out bench/results/sol_mode_agreement.json]

Prints one line per problem (max relative difference, the field) and a summary; exit 1 when a
problem differs by more than --tol (default 0: bit-identical).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

from sol_regress import DEFAULT_DATA, SPECS, _fields, _init, _numbers  # noqa: E402


#: fields reported apart, not compared (see the module docstring)
APART = ("bytes_unfused",)


def _compare(a: dict, b: dict, apart: bool = False) -> tuple[float, str]:
    """Largest relative difference of the fields (those of APART when ``apart``, the others
    otherwise) and where it is."""
    fa = {k: v for k, v in _numbers(a) if k.startswith(APART) == apart}
    fb = {k: v for k, v in _numbers(b) if k.startswith(APART) == apart}
    worst, where = 0.0, ""
    for k in sorted(set(fa) | set(fb)):
        x, y = fa.get(k), fb.get(k)
        if x is None or y is None:
            return float("inf"), f"{k} only on one side"
        d = abs(x - y) / max(abs(x), abs(y)) if x != y else 0.0
        if d > worst:
            worst, where = d, f"{k}: {x:.6g} (shapes only) vs {y:.6g} (real)"
    if not apart and a.get("bottleneck") != b.get("bottleneck") and worst == 0.0:
        return float("inf"), f"bottleneck {a.get('bottleneck')} vs {b.get('bottleneck')}"
    return worst, where


def _one(args) -> dict:
    pdir, n = args
    from solbench.sol import bound_from_counts, load_hardware
    from solbench.sol.counting import CountingError, count_workload
    from solbench.spec import load_problem

    name = Path(pdir).relative_to(Path(pdir).parents[1]).as_posix()
    t0 = time.process_time()
    try:
        p = load_problem(pdir)
    except Exception as e:  # noqa: BLE001 - a problem the loader rejects is not compared
        return {"problem": name, "skipped": f"not loaded: {type(e).__name__}"}
    allow_tf32 = bool(getattr(p.definition, "allow_tf32", False))
    rows = []
    for w in p.workloads[:n]:
        try:
            shape_only = count_workload(p, w, allow_real=False)
        except CountingError:
            return {"problem": name, "skipped": "reads values (counted on real tensors only)"}
        try:
            real = count_workload(p, w, meta=False, fake_failed="compared with the shape-only count")
        except CountingError as e:
            rows.append({"uuid": w.uuid, "max_rel": float("inf"), "where": f"real run failed: {e}",
                         "unfused_max_rel": float("nan")})
            continue
        worst, where, unfused = 0.0, "", 0.0
        for model, hw in SPECS:
            a = _fields(bound_from_counts(shape_only, load_hardware(hw), model, allow_tf32=allow_tf32))
            b = _fields(bound_from_counts(real, load_hardware(hw), model, allow_tf32=allow_tf32))
            d, at = _compare(a, b)
            if d > worst:
                worst, where = d, f"{model}/{hw} {at}"
            unfused = max(unfused, _compare(a, b, apart=True)[0])
        rows.append({"uuid": w.uuid, "shape_mode": shape_only.mode, "max_rel": worst, "where": where,
                     "unfused_max_rel": unfused})
    return {"problem": name, "workloads": rows, "cpu_s": round(time.process_time() - t0, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--workloads", type=int, default=2, help="first N workloads of each problem")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated substrings of problem paths")
    ap.add_argument("--tol", type=float, default=0.0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    data = a.data or DEFAULT_DATA
    if not data.is_dir():
        print("no dataset: pass --data DIR", file=sys.stderr)
        return 2
    pdirs = sorted(str(p.parent) for p in data.glob("*/*/definition.json"))
    if a.only:
        pdirs = [d for d in pdirs if any(o in d for o in a.only.split(","))]
    t0 = time.time()
    results = []
    with mp.get_context("spawn").Pool(a.jobs, initializer=_init) as pool:
        for r in pool.imap_unordered(_one, [(d, a.workloads) for d in pdirs]):
            results.append(r)
            if "skipped" in r:
                print(f"{r['problem']}: skipped ({r['skipped']})", flush=True)
                continue
            worst = max(r["workloads"], key=lambda x: x["max_rel"])
            unf = max((x["unfused_max_rel"] for x in r["workloads"]), key=lambda v: -1 if v != v else v)
            print(f"{r['problem']}: {len(r['workloads'])} workloads, max relative difference "
                  f"{worst['max_rel']:.3g} {worst['where']} (bytes_unfused apart: {unf:.3g}; "
                  f"{r['cpu_s']} s CPU)", flush=True)
    results.sort(key=lambda r: r["problem"])
    compared = [r for r in results if "skipped" not in r]
    bad = [r for r in compared if any(x["max_rel"] > a.tol for x in r["workloads"])]
    n = sum(len(r["workloads"]) for r in compared)
    print(f"{len(compared)} problems ({n} workloads) compared, {len(results) - len(compared)} skipped, "
          f"{len(bad)} differ by more than {a.tol}: {[r['problem'] for r in bad]} "
          f"({time.time() - t0:.0f} s wall)")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"data": str(data), "workloads_per_problem": a.workloads, "tol": a.tol,
                                     "compared": len(compared), "differ": [r["problem"] for r in bad],
                                     "results": results}, indent=1, default=str) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
